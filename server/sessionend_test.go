package server_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// TestStreamEndsBeforeTheSessionCloses proves that a
// generation's stream ends, completed, without waiting for its bridge
// session to close (its processes to stop), and that the Service's Close,
// agentd's shutdown, still waits for that close: no process outlives it.
func TestStreamEndsBeforeTheSessionCloses(t *testing.T) {
	t.Parallel()
	closing, release, closed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	bridge := &fakeBridge{
		onList: offering(serverTools("demo", "echo")),
		onClose: func(context.Context) {
			close(closing)
			<-release // the session's processes are still stopping
			close(closed)
		},
	}
	reg, err := providers.NewRegistry(recordingScript())
	if err != nil {
		t.Fatal(err)
	}
	svc := server.New(server.Options{Bridge: bridge, Providers: reg, Config: config.Default().Generation})
	client := agentdv1.NewAgentServiceClient(dial(t, svc.Register))
	agent := &agentdv1.Agent{
		Provider:        "script",
		Mcps:            []*agentdv1.MCPServer{refServer("", "demo")},
		ProviderOptions: script(t, `{"turns": [{"tool_calls": [{"name": "echo"}]}, {"text": "done"}]}`),
	}

	// The stream ends (EOF, OK) while the session's close is held.
	events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, nil)

	wantCode(t, st, codes.OK)
	if len(events) == 0 || events[len(events)-1].GetCompleted() == nil {
		t.Fatalf("the stream's last event is %v; want completed", events)
	}
	<-closing // the generation closes its session once it is over
	select {
	case <-closed:
		t.Fatal("the session closed before it was released")
	default:
	}

	stopped := make(chan bool)
	go func() {
		svc.Close()
		select {
		case <-closed:
			stopped <- true
		default:
			stopped <- false
		}
	}()
	close(release)
	if !<-stopped {
		t.Error("the Service's Close returned before the session's close had")
	}
	wantCounts(t, bridge, bridgeCounts{Open: 1, List: 1, Call: 1, Close: 1})
}
