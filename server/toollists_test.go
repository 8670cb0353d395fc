package server_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// revisingLists answers a fakeBridge's ListTools as the bridge's schema
// cache does: each server's list has a revision (0: not cached), and the
// first ListTools of a session, the lists the session brought, answers a
// list whose revision the open request named as known as unchanged,
// without its tools. forceUnchanged answers every cached list so, as a
// bridge answers agentd naming a revision that agentd has since forgotten.
type revisingLists struct {
	mu             sync.Mutex
	lists          []*bridgev1.ServerTools
	brought        bool // the session's first ListTools is to come
	known          []uint64
	forceUnchanged bool
}

func (l *revisingLists) open(_ context.Context, req *bridgev1.OpenSessionRequest) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.brought, l.known = true, req.GetKnownRevisions()
	return nil
}

func (l *revisingLists) list(context.Context) ([]*bridgev1.ServerTools, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	brought := l.brought
	l.brought = false
	out := make([]*bridgev1.ServerTools, len(l.lists))
	for i, st := range l.lists {
		out[i] = proto.CloneOf(st)
		r := st.GetRevision()
		if brought && r != 0 && (l.forceUnchanged || i < len(l.known) && l.known[i] == r) {
			out[i].Tools, out[i].Unchanged = nil, true
		}
	}
	return out, nil
}

// set replaces server i's list.
func (l *revisingLists) set(i int, st *bridgev1.ServerTools) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lists[i] = st
}

// withRevision is st with a revision and a schema for each tool.
func withRevision(t *testing.T, st *bridgev1.ServerTools, revision uint64) *bridgev1.ServerTools {
	t.Helper()
	for i, tool := range st.GetTools() {
		if i == 0 {
			continue // the first tool has no schema: offered as the empty object
		}
		schema, err := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{tool.GetName(): map[string]any{"type": "string"}}})
		if err != nil {
			t.Fatal(err)
		}
		tool.InputSchema = schema
	}
	st.Revision = revision
	return st
}

// TestToolListRevisions: agentd makes each server's tool list for the
// model once per revision of the bridge's schema cache. A generation's
// open names the revisions agentd holds (known_revisions, one per server
// in order, 0 for a list never cached); a list the bridge answers as
// unchanged is offered exactly as the one made before: the same tools,
// parameters, events and schema bytes (R-C5: the generations that share
// it change nothing of it). A changed list (a new revision)
// is offered as it now is and named next time; an unchanged answer for a
// revision agentd no longer holds makes it list the session's tools again.
func TestToolListRevisions(t *testing.T) {
	t.Parallel()
	lists := &revisingLists{lists: []*bridgev1.ServerTools{
		withRevision(t, serverTools("a", "a1", "a2"), 7),
		withRevision(t, serverTools("b", "b1", "b2"), 0), // never cached (an OAuth server's)
	}}
	bridge := &fakeBridge{onOpen: lists.open, onList: lists.list}
	prov := plainProvider()
	client := newClient(t, bridge, prov)
	start := &agentdv1.StartGeneration{
		Agent:    &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{commandServer("a", "a-server"), commandServer("b", "b-server")}},
		Messages: userSays("hi"),
	}

	// offered is what a generation offered the model: each tool's name,
	// description and encoded parameters; its started event; and its
	// tool schema bytes.
	type offered struct {
		Tools       []string
		Params      []string
		Started     *agentdv1.GenerationStarted
		SchemaBytes int64
	}
	run := func(name string, wantKnown []uint64, wantLists int) offered {
		t.Helper()
		listsBefore := bridge.counts().List
		events, st := generate(t, client, start, nil)
		wantCode(t, st, codes.OK)
		opens := bridge.openRequests()
		if got := opens[len(opens)-1].GetKnownRevisions(); !cmp.Equal(wantKnown, got) {
			t.Errorf("%s: the open named known revisions %v; want %v", name, got, wantKnown)
		}
		if n := bridge.counts().List - listsBefore; n != wantLists {
			t.Errorf("%s: %d ListTools; want %d", name, n, wantLists)
		}
		reqs := prov.calls()
		req := reqs[len(reqs)-1]
		var o offered
		for i, tool := range req.Tools {
			o.Tools = append(o.Tools, tool.GetName()+": "+tool.GetDescription())
			o.Params = append(o.Params, string(req.ToolParameters[i]))
		}
		o.Started = started(t, events)
		o.Started.GenerationId = ""
		o.SchemaBytes = events[len(events)-1].GetCompleted().GetUsage().GetToolSchemaBytes()
		return o
	}
	first := run("the first generation", nil, 1)
	want := offered{
		Tools: []string{"a1: the a1 tool", "a2: the a2 tool", "b1: the b1 tool", "b2: the b2 tool"},
		Params: []string{
			`{"properties":{},"type":"object"}`, `{"properties":{"a2":{"type":"string"}},"type":"object"}`,
			`{"properties":{},"type":"object"}`, `{"properties":{"b2":{"type":"string"}},"type":"object"}`,
		},
		Started: first.Started,
		// Each tool's name, description and parameters; an absent schema
		// counts as "{}".
		SchemaBytes: 2 * int64(2+len("the a1 tool")+len("{}")+2+len("the a2 tool")+len(`{"properties":{"a2":{"type":"string"}},"type":"object"}`)),
	}
	if diff := cmp.Diff(want, first, protocmp.Transform()); diff != "" {
		t.Errorf("the first generation offered (-want +got):\n%s", diff)
	}
	if got := len(first.Started.GetTools()); got != 4 {
		t.Errorf("the first generation's started event names %d tools; want 4", got)
	}

	if diff := cmp.Diff(first, run("a generation after it", []uint64{7, 0}, 1), protocmp.Transform()); diff != "" {
		t.Errorf("a generation given a's list as unchanged offered (-first +got):\n%s", diff)
	}

	lists.set(0, withRevision(t, serverTools("a", "a1", "a3"), 8))
	changed := run("a generation after a's list changed", []uint64{7, 0}, 1)
	if want := []string{"a1: the a1 tool", "a3: the a3 tool", "b1: the b1 tool", "b2: the b2 tool"}; !cmp.Equal(want, changed.Tools) {
		t.Errorf("after a's list changed, the tools offered were %v; want %v", changed.Tools, want)
	}
	if diff := cmp.Diff(changed, run("the generation after that", []uint64{8, 0}, 1), protocmp.Transform()); diff != "" {
		t.Errorf("the list of a's new revision, given as unchanged, offered (-before +got):\n%s", diff)
	}

	// A revision agentd never made a list of, answered as unchanged: it
	// lists again, and offers the tools of that list.
	lists.set(0, withRevision(t, serverTools("a", "a4"), 9))
	lists.mu.Lock()
	lists.forceUnchanged = true
	lists.mu.Unlock()
	forgotten := run("a generation told of a revision it does not hold", []uint64{8, 0}, 2)
	if want := []string{"a4: the a4 tool", "b1: the b1 tool", "b2: the b2 tool"}; !cmp.Equal(want, forgotten.Tools) {
		t.Errorf("the tools offered after listing again were %v; want %v", forgotten.Tools, want)
	}
	run("the generation after that", []uint64{9, 0}, 1)
}

// A tool whose input schema, as its server lists it, is not a JSON Schema
// is left out of the generation: the model is not offered it, and the
// client is told, after started, which server and tool, and why; the
// generation goes on with the server's other tools.
func TestToolWithBrokenSchemaLeftOut(t *testing.T) {
	t.Parallel()
	files := serverTools("files", "read", "broken")
	files.Tools[1].InputSchema = parameters(t, `{"type":"object","properties":{"q":{"type":"no-such-type"}}}`)
	bridge := &fakeBridge{onList: offering(files)}
	prov := plainProvider()
	client := newClient(t, bridge, prov)
	events, st := generate(t, client, &agentdv1.StartGeneration{
		Agent:    &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{commandServer("files", "files-server")}},
		Messages: userSays("hi"),
	}, nil)
	wantCode(t, st, codes.OK)
	if len(events) < 2 || events[0].GetStarted() == nil || events[1].GetWarning() == nil {
		t.Fatalf("events %v; want started, then a warning", kinds(events))
	}
	var offered []string
	for _, tool := range events[0].GetStarted().GetTools() {
		offered = append(offered, tool.GetName())
	}
	if !slices.Equal(offered, []string{"read"}) {
		t.Errorf("started offers %v; want read alone", offered)
	}
	w := events[1].GetWarning()
	if w.GetCode() != "TOOL_SCHEMA_INVALID" || w.GetServerName() != "files" || w.GetToolName() != "broken" || !strings.Contains(w.GetMessage(), "inputSchema.properties.q.type") {
		t.Errorf("warning %v; want TOOL_SCHEMA_INVALID naming files, broken and the schema's path", w)
	}
	for _, call := range prov.calls() {
		for _, tool := range call.Tools {
			if tool.GetName() == "broken" {
				t.Errorf("the model was offered broken: %v", call.Tools)
			}
		}
	}
}
