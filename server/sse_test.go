package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// sseEvent is one block of an event stream: an event, or a comment.
type sseEvent struct {
	ID      string // "" without an id: line
	Event   string
	Data    string
	Comment string // the text of a comment line (":"), without it
}

// readSSE reads one block of an event stream, up to its blank line, as
// the HTML standard parses one (without the fields this stream does not
// use, retry and multi-line data); io.EOF at the end of the stream.
func readSSE(r *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line != "" {
				err = io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return ev, nil
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			ev.Comment = value
		case "id":
			ev.ID = value
		case "event":
			ev.Event = value
		case "data":
			ev.Data = value
		}
	}
}

// chunkEvents parses a chunk of StreamGenerationEvents, failing unless it
// holds whole blocks of an event stream only.
func chunkEvents(t *testing.T, res *agentdv1.StreamGenerationEventsResponse) []sseEvent {
	t.Helper()
	if ct := res.GetChunk().GetContentType(); ct != "text/event-stream" {
		t.Errorf("a chunk's content type is %q; want text/event-stream", ct)
	}
	r := bufio.NewReader(strings.NewReader(string(res.GetChunk().GetData())))
	var events []sseEvent
	for {
		ev, err := readSSE(r)
		if errors.Is(err, io.EOF) && len(events) > 0 {
			return events
		}
		if err != nil {
			t.Fatalf("chunk %q is not whole events: %v", res.GetChunk().GetData(), err)
		}
		events = append(events, ev)
	}
}

// decoded is the GenerateResponse an event's data holds, checked against
// its id and kind.
func decoded(t *testing.T, ev sseEvent) *agentdv1.GenerateResponse {
	t.Helper()
	var msg agentdv1.GenerateResponse
	if err := protojson.Unmarshal([]byte(ev.Data), &msg); err != nil {
		t.Fatalf("event %s's data %q: %v", ev.ID, ev.Data, err)
	}
	if id := strconv.FormatInt(msg.GetSequence(), 10); id != ev.ID {
		t.Errorf("event id %q; its data's sequence is %s", ev.ID, id)
	}
	if k := kinds([]*agentdv1.GenerateResponse{&msg}); ev.Event != k[0] {
		t.Errorf("event %s is named %q; its data is a %s", ev.ID, ev.Event, k[0])
	}
	return &msg
}

// sseStream follows generation id over StreamGenerationEvents after
// sequence number after, with a Last-Event-ID when lastID is not empty,
// and returns the stream.
func sseStream(t *testing.T, ctx context.Context, client agentdv1.AgentServiceClient, id string, after int64, lastID string) grpc.ServerStreamingClient[agentdv1.StreamGenerationEventsResponse] {
	t.Helper()
	if lastID != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "last-event-id", lastID)
	}
	s, err := client.StreamGenerationEvents(ctx, &agentdv1.StreamGenerationEventsRequest{GenerationId: id, After: after})
	if err != nil {
		t.Fatalf("StreamGenerationEvents: %v", err)
	}
	return s
}

// sseAll reads a StreamGenerationEvents stream to its end: its blocks,
// its header metadata and how it ended.
func sseAll(t *testing.T, s grpc.ServerStreamingClient[agentdv1.StreamGenerationEventsResponse]) ([]sseEvent, metadata.MD, *status.Status) {
	t.Helper()
	var events []sseEvent
	for {
		res, err := s.Recv()
		if errors.Is(err, io.EOF) {
			md, _ := s.Header()
			return events, md, status.New(codes.OK, "")
		}
		if err != nil {
			return events, nil, status.Convert(err)
		}
		events = append(events, chunkEvents(t, res)...)
	}
}

// gatedTurns is a provider named "gated" whose one turn says "a", then
// one word more as each gate opens, in order ("b", "c", ...), and stops.
func gatedTurns(gates ...chan struct{}) *fakeProvider {
	return &fakeProvider{name: "gated", caps: providers.Capabilities{ModelOptional: true}, stream: func(ctx context.Context, _ *providers.Request) iter.Seq2[providers.Event, error] {
		return func(yield func(providers.Event, error) bool) {
			if !yield(&providers.TextDelta{Text: "a"}, nil) {
				return
			}
			for i, gate := range gates {
				select {
				case <-gate:
				case <-ctx.Done():
					yield(nil, context.Cause(ctx))
					return
				}
				if !yield(&providers.TextDelta{Text: string(rune('b' + i))}, nil) {
					return
				}
			}
			yield(&providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_END_TURN}, nil)
		}
	}}
}

// StreamGenerationEvents writes a generation's events as an event
// stream, each chunk whole blocks: a comment first, then each stored
// event with its sequence as id, its kind as event and its JSON as data,
// until completed; its headers forbid caching and proxy buffering. The
// Last-Event-ID header wins over after.
func TestStreamGenerationEvents(t *testing.T) {
	t.Parallel()
	a := newPausable(t, &fakeBridge{}, nil, recordingScript())
	events, st := generate(t, a.client, &agentdv1.StartGeneration{Agent: textAgent(t, "hello there"), Messages: userSays("hi")}, nil)
	wantCode(t, st, codes.OK)
	id := started(t, events).GetGenerationId()
	log := storedEvents(t, a, id)

	for _, tc := range []struct {
		name   string
		after  int64
		lastID string
		from   int // the first event of log expected
	}{
		{"all", 0, "", 0},
		{"after 2", 2, "", 2},
		{"Last-Event-ID 3 over after 1", 1, "3", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blocks, md, sst := sseAll(t, sseStream(t, t.Context(), a.client, id, tc.after, tc.lastID))
			wantCode(t, sst, codes.OK)
			if len(blocks) == 0 || blocks[0].Comment != "keepalive" {
				t.Fatalf("blocks %v; want a comment first", blocks)
			}
			var got []*agentdv1.GenerateResponse
			for _, b := range blocks[1:] {
				got = append(got, decoded(t, b))
			}
			if diff := cmp.Diff(log[tc.from:], got, protocmp.Transform()); diff != "" {
				t.Errorf("events (-stored +streamed):\n%s", diff)
			}
			if cc, xab := md.Get("cache-control"), md.Get("x-accel-buffering"); !cmp.Equal(cc, []string{"no-cache"}) || !cmp.Equal(xab, []string{"no"}) {
				t.Errorf("header metadata %v; want cache-control no-cache, x-accel-buffering no", md)
			}
		})
	}
}

// A generation that fails ends its event stream with an error
// event naming its status (the HTTP response has begun: its status can
// no longer change), and then OK. Before anything is sent, another
// tenant's generation is NOT_FOUND, and a Last-Event-ID that is not a
// sequence number INVALID_ARGUMENT.
func TestStreamGenerationEventsErrors(t *testing.T) {
	t.Parallel()
	a, events, st := failedGeneration(t)
	id := started(t, events).GetGenerationId()
	blocks, _, sst := sseAll(t, sseStream(t, t.Context(), a.client, id, 0, ""))
	wantCode(t, sst, codes.OK)
	if len(blocks) != 3 || decoded(t, blocks[1]).GetStarted() == nil || blocks[2].Event != "error" || blocks[2].ID != "" {
		t.Fatalf("blocks %v; want a comment, started, then an error event without an id", blocks)
	}
	var data map[string]string
	if err := json.Unmarshal([]byte(blocks[2].Data), &data); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"code": "unavailable", "message": st.Message()}, data); diff != "" {
		t.Errorf("error event's data (-want +got):\n%s", diff)
	}

	s := newStore(t, 0)
	clients := tenantClients(t, server.Options{Bridge: &fakeBridge{}, Checkpoints: s, Generations: s.Generations(), Replica: "r",
		Tenants: tenantsOf(map[string]*server.Tenant{"acme": {}, "globex": {}})}, recordingScript())
	events, gst := generate(t, clients("acme"), &agentdv1.StartGeneration{Agent: textAgent(t, "hi"), Messages: userSays("hi")}, nil)
	wantCode(t, gst, codes.OK)
	id = started(t, events).GetGenerationId()
	for _, tc := range []struct {
		tenant, id, lastID string
		code               codes.Code
	}{
		{"globex", id, "", codes.NotFound},
		{"globex", "gen_unknown", "", codes.NotFound},
		{"acme", id, "x", codes.InvalidArgument},
		{"acme", id, "-1", codes.InvalidArgument},
	} {
		blocks, _, sst := sseAll(t, sseStream(t, t.Context(), clients(tc.tenant), tc.id, 0, tc.lastID))
		wantCode(t, sst, tc.code)
		if len(blocks) != 0 {
			t.Errorf("%s following %s (Last-Event-ID %q) got %v before its status; want nothing", tc.tenant, tc.id, tc.lastID, blocks)
		}
	}
}

// On synctest's clock, an event stream that has nothing to send
// sends a comment line 15 s after its last chunk, and again 15 s later;
// the events that come after go out as they are stored, and the stream
// ends after completed.
func TestStreamGenerationEventsHeartbeat(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		a := newPausable(t, &fakeBridge{}, nil, gatedTurns(gate))
		res, err := a.client.CreateGeneration(t.Context(), &agentdv1.CreateGenerationRequest{Start: &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "gated"}, Messages: userSays("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		s := sseStream(t, t.Context(), a.client, res.GetGenerationId(), 0, "")
		var seen []string
		last := time.Now()
		for len(seen) < 5 {
			res, err := s.Recv()
			if err != nil {
				t.Fatalf("after %v: %v", seen, err)
			}
			for _, ev := range chunkEvents(t, res) {
				if ev.Comment == "" {
					seen = append(seen, decoded(t, ev).GetTextDelta().GetText()+ev.Event)
					continue
				}
				seen = append(seen, "keepalive")
				if since := time.Since(last); len(seen) > 1 && since != 15*time.Second {
					t.Errorf("a heartbeat came %v after the chunk before it; want 15s", since)
				}
			}
			last = time.Now()
		}
		if diff := cmp.Diff([]string{"keepalive", "started", "atext_delta", "keepalive", "keepalive"}, seen); diff != "" {
			t.Errorf("chunks (-want +got):\n%s", diff)
		}
		close(gate)
		blocks, _, st := sseAll(t, s)
		wantCode(t, st, codes.OK)
		if n := len(blocks); n == 0 || blocks[n-1].Event != "completed" || decoded(t, blocks[0]).GetTextDelta().GetText() != "b" {
			t.Errorf("after the gate opened: %v; want b ... completed", blocks)
		}
		waitForState(t, a, res.GetGenerationId(), store.Completed)
	})
}
