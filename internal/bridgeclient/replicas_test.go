package bridgeclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/bridgetest"
	"github.com/agentd/agentd/internal/fault"
)

// replicatedClient is NewReplicated over a connection that resolves to
// the replicas, balanced as agentd balances them.
func replicatedClient(t *testing.T, rs ...*bridgetest.Replica) *bridgeclient.Client {
	t.Helper()
	return bridgeclient.NewReplicated(bridgetest.DialReplicas(t, rs...), slog.New(slog.DiscardHandler))
}

// opened returns the replica that opened exactly one session (and the
// others, which opened none).
func opened(t *testing.T, rs ...*bridgetest.Replica) (*bridgetest.Replica, []*bridgetest.Replica) {
	t.Helper()
	var on *bridgetest.Replica
	var others []*bridgetest.Replica
	for _, r := range rs {
		switch r.Opens.Load() {
		case 0:
			others = append(others, r)
		case 1:
			if on != nil {
				t.Fatalf("sessions opened on %s and %s; want one", on.Name, r.Name)
			}
			on = r
		default:
			t.Fatalf("%s opened %d sessions; want at most one", r.Name, r.Opens.Load())
		}
	}
	if on == nil {
		t.Fatal("no replica opened a session")
	}
	return on, others
}

// holdingReplicas starts replicas whose tool "hold" reports its replica on
// holding and answers only when the test ends, and whose tool "where"
// answers its replica's name; calls counts the calls each saw, by tool.
func holdingReplicas(t *testing.T, names ...string) (rs []*bridgetest.Replica, holding chan string, calls *sync.Map) {
	t.Helper()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	holding = make(chan string, len(names))
	calls = &sync.Map{}
	for _, name := range names {
		rs = append(rs, bridgetest.StartReplica(t, name, &bridgetest.Service{
			OnCall: func(req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
				n, _ := calls.LoadOrStore(name+"/"+req.GetToolName(), new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
				if req.GetToolName() == "hold" {
					holding <- name
					<-release
				}
				return &bridgev1.CallToolResponse{Output: name}, nil
			},
		}))
	}
	return rs, holding, calls
}

func callCount(calls *sync.Map, key string) int32 {
	n, ok := calls.Load(key)
	if !ok {
		return 0
	}
	return n.(*atomic.Int32).Load()
}

// X-G6: a replica that dies during a call fails that call as of unknown
// outcome (a tool error for the model, not an error of the generation),
// never sent again; the session's next call opens a session on the other
// replica and runs there; Close closes that one.
func TestReplicatedBridgeFailover(t *testing.T) {
	t.Parallel()
	rs, holding, calls := holdingReplicas(t, "a", "b")
	sess, err := replicatedClient(t, rs...).OpenSession(t.Context(), &bridgev1.OpenSessionRequest{GenerationId: "gen-1"}, nil)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	defer sess.Close(context.Background())
	first, others := opened(t, rs...)
	other := others[0]

	type answer struct {
		res *bridgev1.CallToolResponse
		err error
	}
	held := make(chan answer, 1)
	go func() {
		res, err := sess.CallTool(t.Context(), "files", "hold", "{}")
		held <- answer{res, err}
	}()
	if got := <-holding; got != first.Name {
		t.Fatalf("the call ran on %s; the session is on %s", got, first.Name)
	}
	first.Server.Stop() // the replica dies with the call in flight

	a := <-held
	if a.err != nil {
		t.Fatalf("the call in flight on the lost replica: %v; want a result for the model", a.err)
	}
	var out struct{ Error string }
	if err := json.Unmarshal([]byte(a.res.GetOutput()), &out); err != nil || !a.res.GetIsError() ||
		!strings.Contains(out.Error, "may or may not have run") || !strings.Contains(out.Error, `"files"`) {
		t.Errorf("the call in flight on the lost replica = %v; want a tool error saying it may or may not have run, naming the server", a.res)
	}
	res, err := sess.CallTool(t.Context(), "files", "where", "{}")
	if err != nil || res.GetOutput() != other.Name {
		t.Fatalf("the next call = %v, %v; want it to run on %s", res, err, other.Name)
	}
	if n := other.Opens.Load(); n != 1 {
		t.Errorf("%s opened %d sessions; want 1", other.Name, n)
	}
	if n := callCount(calls, first.Name+"/hold") + callCount(calls, other.Name+"/hold"); n != 1 {
		t.Errorf("hold was called %d times; want once, never again", n)
	}
	sess.Close(context.Background())
	if n := other.Fake.Closed(); n != 1 {
		t.Errorf("%s closed %d sessions; want 1", other.Name, n)
	}
}

// X-G6: a replica that dies while the session lists its tools: the
// listing is asked again of a new session on the other replica (nothing
// ran). An Unavailable the bridge itself returns (an MCP server it cannot
// reach) is the generation's error, and no other session opens.
func TestReplicatedBridgeListTools(t *testing.T) {
	t.Parallel()
	t.Run("replica lost", func(t *testing.T) {
		t.Parallel()
		listing := make(chan string, 2)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		var listings atomic.Int32
		var rs []*bridgetest.Replica
		for _, name := range []string{"a", "b"} {
			rs = append(rs, bridgetest.StartReplica(t, name, &bridgetest.Service{
				OnList: func(*bridgev1.ListToolsRequest) (*bridgev1.ListToolsResponse, error) {
					listing <- name
					if listings.Add(1) == 1 {
						<-release // the replica dies meanwhile
					}
					return &bridgev1.ListToolsResponse{Servers: []*bridgev1.ServerTools{{ServerName: "files", Tools: []*bridgev1.Tool{{Name: "on_" + name}}}}}, nil
				},
			}))
		}
		sess, err := replicatedClient(t, rs...).OpenSession(t.Context(), &bridgev1.OpenSessionRequest{}, nil)
		if err != nil {
			t.Fatalf("OpenSession: %v", err)
		}
		defer sess.Close(context.Background())
		first, others := opened(t, rs...)
		listed := make(chan []*bridgev1.ServerTools, 1)
		go func() {
			tools, err := sess.ListTools(t.Context())
			if err != nil {
				t.Errorf("ListTools: %v", err)
			}
			listed <- tools
		}()
		if got := <-listing; got != first.Name {
			t.Fatalf("listed on %s; the session is on %s", got, first.Name)
		}
		first.Server.Stop()
		tools := <-listed
		if len(tools) != 1 || tools[0].GetTools()[0].GetName() != "on_"+others[0].Name {
			t.Errorf("ListTools = %v; want the tools listed on %s", tools, others[0].Name)
		}
	})
	t.Run("bridge says unavailable", func(t *testing.T) {
		t.Parallel()
		var rs []*bridgetest.Replica
		for _, name := range []string{"a", "b"} {
			rs = append(rs, bridgetest.StartReplica(t, name, &bridgetest.Service{
				OnList: func(*bridgev1.ListToolsRequest) (*bridgev1.ListToolsResponse, error) {
					return nil, status.Error(codes.Unavailable, `the MCP server "files" cannot be reached`)
				},
			}))
		}
		sess, err := replicatedClient(t, rs...).OpenSession(t.Context(), &bridgev1.OpenSessionRequest{}, nil)
		if err != nil {
			t.Fatalf("OpenSession: %v", err)
		}
		defer sess.Close(context.Background())
		_, err = sess.ListTools(t.Context())
		if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), "cannot be reached") {
			t.Errorf("ListTools = %v; want the bridge's Unavailable", err)
		}
		if n := rs[0].Opens.Load() + rs[1].Opens.Load(); n != 1 {
			t.Errorf("%d sessions opened; want 1: the replica was not lost", n)
		}
	})
}

// X-G6: a replica that refuses a session Unavailable (it is shutting down)
// leaves the session to another; when every replica refuses, OpenSession
// fails Unavailable after a bounded number of tries. Other refusals are
// not tried elsewhere.
func TestReplicatedBridgeOpen(t *testing.T) {
	t.Parallel()
	refuse := func(code codes.Code) *bridgetest.Service {
		return &bridgetest.Service{OnOpen: func(*bridgev1.OpenSessionRequest) error {
			return status.Error(code, fmt.Sprintf("refused: %v", code))
		}}
	}
	t.Run("one refuses", func(t *testing.T) {
		t.Parallel()
		down := bridgetest.StartReplica(t, "down", refuse(codes.Unavailable))
		up := bridgetest.StartReplica(t, "up", &bridgetest.Service{})
		client := replicatedClient(t, down, up)
		for range 4 {
			sess, err := client.OpenSession(t.Context(), &bridgev1.OpenSessionRequest{}, nil)
			if err != nil {
				t.Fatalf("OpenSession: %v", err)
			}
			sess.Close(context.Background())
		}
		if n := up.Opens.Load(); n != 4 {
			t.Errorf("the live replica opened %d of 4 sessions", n)
		}
	})
	t.Run("all refuse", func(t *testing.T) {
		t.Parallel()
		a, b := bridgetest.StartReplica(t, "a", refuse(codes.Unavailable)), bridgetest.StartReplica(t, "b", refuse(codes.Unavailable))
		_, err := replicatedClient(t, a, b).OpenSession(t.Context(), &bridgev1.OpenSessionRequest{}, nil)
		if fault.KindOf(err) != fault.Unavailable {
			t.Errorf("OpenSession = %v; want Unavailable", err)
		}
		if n := a.Opens.Load() + b.Opens.Load(); n != 4 {
			t.Errorf("%d opens tried; want 4", n)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		a, b := bridgetest.StartReplica(t, "a", refuse(codes.InvalidArgument)), bridgetest.StartReplica(t, "b", refuse(codes.InvalidArgument))
		_, err := replicatedClient(t, a, b).OpenSession(t.Context(), &bridgev1.OpenSessionRequest{}, nil)
		if fault.KindOf(err) != fault.Invalid {
			t.Errorf("OpenSession = %v; want Invalid", err)
		}
		if n := a.Opens.Load() + b.Opens.Load(); n != 1 {
			t.Errorf("%d opens tried; want 1", n)
		}
	})
}
