package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/server"
)

// splitResults is a store that notes every tool_call_finished event
// appended to a log without a checkpoint.
type splitResults struct {
	store.Generations
	mu    sync.Mutex
	split []int64
}

func (s *splitResults) Append(ctx context.Context, tenant, id string, epoch int64, events []store.Event) (int64, error) {
	s.mu.Lock()
	for _, e := range events {
		if e.Kind == "tool_call_finished" {
			s.split = append(s.split, e.Seq)
		}
	}
	s.mu.Unlock()
	return s.Generations.Append(ctx, tenant, id, epoch, events)
}

// X-G3: a tool call's tool_call_finished event is written in one write
// with the checkpoint that holds the call's result, never alone: a
// replica that dies between two writes must not leave a log saying the
// call finished with a checkpoint that does not have its result (its
// adopter would report the call as of unknown outcome, and the log would
// say it finished twice). Many calls finishing at once, over several
// turns, give the journal's writer every chance to come between the
// event and its checkpoint.
func TestToolResultWrittenWithItsCheckpoint(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	gens := &splitResults{Generations: st.Generations()}
	bridge := &fakeBridge{onList: offering(serverTools("files", "read"))}
	client := newClientWith(t, server.Options{Bridge: bridge, Config: config.Default().Generation, Checkpoints: st, Generations: gens, Replica: "replica-a"}, recordingScript())
	var turns []string
	for turn := range 5 {
		var calls []string
		for i := range 20 {
			calls = append(calls, fmt.Sprintf(`{"name": "read", "arguments": {"path": "%d-%d"}}`, turn, i))
		}
		turns = append(turns, `{"tool_calls": [`+strings.Join(calls, ", ")+`]}`)
	}
	agent := &agentdv1.Agent{
		Provider: "script", Mcps: []*agentdv1.MCPServer{refServer("files", "files")},
		ProviderOptions: script(t, `{"turns": [`+strings.Join(turns, ", ")+`, {"text": "done"}]}`),
	}
	for range 2 {
		_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("read them all")}, nil)
		wantCode(t, st, codes.OK)
	}
	gens.mu.Lock()
	defer gens.mu.Unlock()
	if len(gens.split) > 0 {
		t.Errorf("tool_call_finished events %v were appended without the checkpoint holding their results", gens.split)
	}
}
