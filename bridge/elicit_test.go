package bridge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/testwait"
)

// serverRequests forwards the server requests of a session's stream, in
// order, until the stream ends.
func serverRequests(stream grpc.ServerStreamingClient[bridgev1.OpenSessionResponse]) <-chan *bridgev1.ServerRequest {
	out := make(chan *bridgev1.ServerRequest, 16)
	go func() {
		defer close(out)
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			if r := ev.GetRequest(); r != nil {
				out <- r
			}
		}
	}()
	return out
}

// openAsking opens a session of specs, and a CallTools stream on it; the
// channel gets the server requests its OpenSession stream carries.
func openAsking(t *testing.T, ctx context.Context, client bridgev1.BridgeServiceClient, specs ...*bridgev1.ServerSpec) (string, <-chan *bridgev1.ServerRequest, callsStream) {
	t.Helper()
	id, events := open(t, ctx, client, specs...)
	return id, serverRequests(events), openCalls(t, ctx, client, id)
}

// nextRequest waits for the next server request.
func nextRequest(t *testing.T, requests <-chan *bridgev1.ServerRequest) *bridgev1.ServerRequest {
	t.Helper()
	r := testwait.Recv(t, requests, "a server request on the session's stream")
	if r == nil {
		t.Fatal("the session's stream ended before a server request came")
	}
	return r
}

// answerElicitation answers r with result.
func answerElicitation(t *testing.T, client bridgev1.BridgeServiceClient, session string, r *bridgev1.ServerRequest, result *bridgev1.ElicitationResult) {
	t.Helper()
	_, err := client.AnswerServerRequest(t.Context(), &bridgev1.AnswerServerRequestRequest{
		SessionId: session, Id: r.GetId(), Answer: &bridgev1.AnswerServerRequestRequest_Elicitation{Elicitation: result},
	})
	if err != nil {
		t.Fatalf("AnswerServerRequest: %v", err)
	}
}

// toolOutput decodes the report a fake's tool (elicit, sample) makes of
// the answer it received.
func toolOutput[T any](t *testing.T, tool string, res *bridgev1.CallToolsResponse) T {
	t.Helper()
	if res.GetResult() == nil || res.GetResult().GetIsError() {
		t.Fatalf("%s answered %v, want a result", tool, res)
	}
	var out T
	if err := json.Unmarshal([]byte(res.GetResult().GetOutput()), &out); err != nil {
		t.Fatalf("%s's output %q: %v", tool, res.GetResult().GetOutput(), err)
	}
	return out
}

func mustStructOf(t *testing.T, v any) *structpb.Struct {
	t.Helper()
	s, err := toStruct(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// elicitServers are the elicit tool's servers of the tests: the stdio
// fake and the HTTP fake, over Streamable HTTP and legacy HTTP+SSE.
func elicitServers(t *testing.T) []elicitServer {
	return []elicitServer{
		{"stdio", true, func(t *testing.T) *bridgev1.ServerSpec { return commandSpec(t, "asker", mcptest.Tools, nil) }},
		{"stateless http", true, func(t *testing.T) *bridgev1.ServerSpec {
			srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Stateless})
			return httpSpec("asker", srv.URL, "", roomyTimeout)
		}},
		{"http", false, func(t *testing.T) *bridgev1.ServerSpec {
			srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable})
			return httpSpec("asker", srv.URL, "", roomyTimeout)
		}},
		{"sse", false, func(t *testing.T) *bridgev1.ServerSpec {
			srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.SSE})
			return httpSpec("asker", srv.URL, "", roomyTimeout)
		}},
	}
}

// elicitServer is a server of the elicit tool. modern: it negotiates
// 2026-07-28, where its questions are input requests of the call's result
// (X-M8).
type elicitServer struct {
	name   string
	modern bool
	spec   func(t *testing.T) *bridgev1.ServerSpec
}

// TestElicitation: X-M4. A server's elicitation during a tools/call
// reaches agentd on the session's stream, naming the server and the call,
// with its message and schema (form) or URL (url mode); agentd's answer
// goes back to the server: an accepted form's content completed with the
// schema's defaults by the client (SEP-1034: the server sees them on the
// wire), a decline or cancel as it is, and an error answer as the
// server's request's failure.
func TestElicitation(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(c *config.Bridge) { c.AllowPrivateNetworks = true })
	formSchema := mustStructOf(t, mcptest.ElicitForm.RequestedSchema)

	for _, srv := range elicitServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			id, requests, stream := openAsking(t, ctx, f.client, srv.spec(t))

			// X-M4 form, accepted with part of the content.
			startCall(t, stream, 7, "asker", "elicit", `{}`)
			r := nextRequest(t, requests)
			want := &bridgev1.ServerRequest{Id: r.GetId(), ServerName: "asker", CallId: 7, Kind: &bridgev1.ServerRequest_Elicitation{Elicitation: &bridgev1.Elicitation{
				Mode: "form", Message: "Who are you?", RequestedSchema: formSchema,
			}}, Deferrable: srv.modern}
			if diff := cmp.Diff(want, r, protocmp.Transform()); diff != "" {
				t.Errorf("form request (-want +got):\n%s", diff)
			}
			answerElicitation(t, f.client, id, r, &bridgev1.ElicitationResult{Action: "accept", Content: mustStruct(t, map[string]any{"name": "Grace", "age": 40})})
			got := toolOutput[mcptest.ElicitOutput](t, "elicit", recvAnswer(t, stream))
			wantOut := mcptest.ElicitOutput{Action: "accept", Content: map[string]any{"name": "Grace", "age": 40.0, "ratio": 0.5, "subscribe": true, "color": "green"}}
			if diff := cmp.Diff(wantOut, got); diff != "" {
				t.Errorf("what the server received (-want +got):\n%s", diff)
			}

			// X-M4 url mode.
			startCall(t, stream, 8, "asker", "elicit", `{"mode":"url"}`)
			r = nextRequest(t, requests)
			want = &bridgev1.ServerRequest{Id: r.GetId(), ServerName: "asker", CallId: 8, Kind: &bridgev1.ServerRequest_Elicitation{Elicitation: &bridgev1.Elicitation{
				Mode: "url", Message: mcptest.ElicitURL.Message, Url: mcptest.ElicitURL.URL, ElicitationId: mcptest.ElicitURL.ElicitationID,
			}}, Deferrable: srv.modern}
			if diff := cmp.Diff(want, r, protocmp.Transform()); diff != "" {
				t.Errorf("url request (-want +got):\n%s", diff)
			}
			answerElicitation(t, f.client, id, r, &bridgev1.ElicitationResult{Action: "accept"})
			if got := toolOutput[mcptest.ElicitOutput](t, "elicit", recvAnswer(t, stream)); got.Action != "accept" || got.Content != nil {
				t.Errorf("the server received %+v, want a bare accept", got)
			}

			// X-M4 decline and cancel.
			for i, action := range []string{"decline", "cancel"} {
				startCall(t, stream, uint64(9+i), "asker", "elicit", `{}`)
				answerElicitation(t, f.client, id, nextRequest(t, requests), &bridgev1.ElicitationResult{Action: action})
				if got := toolOutput[mcptest.ElicitOutput](t, "elicit", recvAnswer(t, stream)); got.Action != action || got.Content != nil {
					t.Errorf("the server received %+v, want %s", got, action)
				}
			}

			// X-M4 agentd cannot answer: the server's request fails.
			startCall(t, stream, 11, "asker", "elicit", `{}`)
			r = nextRequest(t, requests)
			st := fault.Status(fault.New(fault.FailedPrecondition, "nobody is there to answer")).Proto()
			if _, err := f.client.AnswerServerRequest(t.Context(), &bridgev1.AnswerServerRequestRequest{SessionId: id, Id: r.GetId(),
				Answer: &bridgev1.AnswerServerRequestRequest_Error{Error: &bridgev1.CallError{Code: st.GetCode(), Message: st.GetMessage()}}}); err != nil {
				t.Fatal(err)
			}
			res := recvAnswer(t, stream)
			if !res.GetResult().GetIsError() || !strings.Contains(res.GetResult().GetOutput(), "nobody is there to answer") {
				t.Errorf("elicit answered %v, want the tool's failure with agentd's error", res)
			}

			// X-M4 two calls in flight: the second question cannot be
			// told apart, and names no call; X-M8 an input request is
			// its call's.
			startCall(t, stream, 12, "asker", "elicit", `{}`)
			first := nextRequest(t, requests)
			startCall(t, stream, 13, "asker", "elicit", `{}`)
			second := nextRequest(t, requests)
			wantSecond := uint64(0)
			if srv.modern {
				wantSecond = 13
			}
			if first.GetCallId() != 12 || second.GetCallId() != wantSecond {
				t.Errorf("call ids of the questions = %d, %d; want 12, then %d while two calls run", first.GetCallId(), second.GetCallId(), wantSecond)
			}
			answerElicitation(t, f.client, id, second, &bridgev1.ElicitationResult{Action: "decline"})
			answerElicitation(t, f.client, id, first, &bridgev1.ElicitationResult{Action: "cancel"})
			actions := map[uint64]string{}
			for range 2 {
				res := recvAnswer(t, stream)
				actions[res.GetId()] = toolOutput[mcptest.ElicitOutput](t, "elicit", res).Action
			}
			if diff := cmp.Diff(map[uint64]string{12: "cancel", 13: "decline"}, actions); diff != "" {
				t.Errorf("what the servers received (-want +got):\n%s", diff)
			}
		})
	}
}

// TestElicitationOutlivesReadTimeout: X-M4. While a person answers, the
// call's read_timeout does not run. The elicit call starts first; once its
// question is on the stream, a hanging call with the same read_timeout
// starts on another server, and only after that one timed out (so
// read_timeout has passed for the elicit call too) does the answer go:
// the elicit call still succeeds, answered after the timed-out one. Warm
// spares keep the short read_timeout off the stdio handshakes (X-H6).
// The read_timeout is its own, longer than heldTimeout: once the answer
// goes, the elicit call has a whole read_timeout to finish, which a busy
// machine running every test at once may need.
func TestElicitationOutlivesReadTimeout(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(c *config.Bridge) {
		c.AllowPrivateNetworks = true
		warmTools(t, "asker")(c)
		warmTools(t, "hanger")(c)
	})
	waitSpare(t, f, "asker")
	waitSpare(t, f, "hanger")
	const heldTimeout = 5 * time.Second
	short := func(s *bridgev1.ServerSpec) *bridgev1.ServerSpec {
		s.ReadTimeout = durationpb.New(heldTimeout)
		return s
	}
	cases := []struct {
		name        string
		asker, hang func(t *testing.T) *bridgev1.ServerSpec
		hangTool    string
	}{
		{"stdio",
			func(*testing.T) *bridgev1.ServerSpec { return short(refSpec("asker", "asker")) },
			func(*testing.T) *bridgev1.ServerSpec { return short(refSpec("hanger", "hanger")) }, "hang"},
		{"http",
			func(t *testing.T) *bridgev1.ServerSpec {
				return httpSpec("asker", mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable}).URL, "", heldTimeout)
			},
			func(t *testing.T) *bridgev1.ServerSpec {
				return httpSpec("hanger", mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable}).URL, "", heldTimeout)
			}, "silent"},
		{"sse",
			func(t *testing.T) *bridgev1.ServerSpec {
				return httpSpec("asker", mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.SSE}).URL, "", heldTimeout)
			},
			func(t *testing.T) *bridgev1.ServerSpec {
				return httpSpec("hanger", mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.SSE}).URL, "", heldTimeout)
			}, "silent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			id, requests, stream := openAsking(t, ctx, f.client, tc.asker(t), tc.hang(t))
			list(t, f.client, id) // connects both: no handshake is timed below

			startCall(t, stream, 1, "asker", "elicit", `{}`)
			r := nextRequest(t, requests)
			startCall(t, stream, 2, "hanger", tc.hangTool, `{}`)
			if res := recvAnswer(t, stream); res.GetId() != 2 || answerCode(res) != codes.DeadlineExceeded {
				t.Fatalf("first answer = %v; want the hanging call's timeout while the elicit call waits for its answer", res)
			}
			answerElicitation(t, f.client, id, r, &bridgev1.ElicitationResult{Action: "accept", Content: mustStruct(t, map[string]any{"name": "Grace"})})
			res := recvAnswer(t, stream)
			if res.GetId() != 1 {
				t.Fatalf("answer = %v; want the elicit call's", res)
			}
			if got := toolOutput[mcptest.ElicitOutput](t, "elicit", res); got.Action != "accept" || got.Content["name"] != "Grace" {
				t.Errorf("the server received %+v, want the late answer", got)
			}
		})
	}
}

// TestElicitationSessionCloses: X-M4. Closing the session while a
// question waits for its answer ends the call that asked
// (FailedPrecondition, as for any call the close cuts short).
func TestElicitationSessionCloses(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(c *config.Bridge) { c.AllowPrivateNetworks = true })
	for _, srv := range elicitServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			id, requests, stream := openAsking(t, t.Context(), f.client, srv.spec(t))
			startCall(t, stream, 1, "asker", "elicit", `{}`)
			r := nextRequest(t, requests)
			if r.GetCallId() != 1 {
				t.Errorf("request = %v, want call 1's", r)
			}
			closeSession(t, f.client, id)
			// The close ends the call: FailedPrecondition, or, when the
			// server's tool answers first, with the refusal of its
			// question (the close and the answer race).
			res := recvAnswer(t, stream)
			refused := res.GetResult().GetIsError() && strings.Contains(res.GetResult().GetOutput(), "the bridge session is closed")
			if res.GetId() != 1 || answerCode(res) != codes.FailedPrecondition && !refused {
				t.Fatalf("answer to the call whose question the close cut short = %v; want FailedPrecondition or the question's refusal", res)
			}
		})
	}
}

// TestElicitationSharedProcess: X-M4. A process that serves several
// sessions asks the session whose call is in flight; on 2025-11-25, when
// calls of several sessions are, nothing tells whose question it is, and
// it is declined (mcpconn's elicitee). X-M8: on 2026-07-28, as this go-sdk
// fake speaks, each question is an input request of its own call's
// result, so each session is asked its own.
func TestElicitationSharedProcess(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, registeredTools(t, map[string]config.Shared{"shared": config.SharedPerTenant}))
	a, eventsA := open(t, t.Context(), f.client, refSpec("x", "shared"))
	b, eventsB := open(t, t.Context(), f.client, refSpec("y", "shared"))
	requestsA, requestsB := serverRequests(eventsA), serverRequests(eventsB)
	if pa, pb := callPid(t, f.client, a, "x", "pid"), callPid(t, f.client, b, "y", "pid"); pa != pb {
		t.Fatalf("a shared server ran two processes: %d and %d", pa, pb)
	}
	streamA := openCalls(t, t.Context(), f.client, a)
	streamB := openCalls(t, t.Context(), f.client, b)

	startCall(t, streamA, 1, "x", "elicit", `{}`)
	r := nextRequest(t, requestsA)
	if r.GetServerName() != "x" || r.GetCallId() != 1 {
		t.Errorf("session a's request = %v, want its server x and call 1", r)
	}
	startCall(t, streamB, 1, "y", "elicit", `{}`)
	// The go-sdk fake speaks 2026-07-28 (X-M8): a question is an input
	// request of its call's result, so it is known to be session b's.
	rb := nextRequest(t, requestsB)
	if rb.GetServerName() != "y" || rb.GetCallId() != 1 || !rb.GetDeferrable() {
		t.Errorf("session b's request = %v, want its server y and call 1, deferrable", rb)
	}
	answerElicitation(t, f.client, b, rb, &bridgev1.ElicitationResult{Action: "decline"})
	if got := toolOutput[mcptest.ElicitOutput](t, "elicit", recvAnswer(t, streamB)); got.Action != "decline" {
		t.Errorf("session b's server received %+v, want decline", got)
	}
	answerElicitation(t, f.client, a, r, &bridgev1.ElicitationResult{Action: "accept", Content: mustStruct(t, map[string]any{})})
	if got := toolOutput[mcptest.ElicitOutput](t, "elicit", recvAnswer(t, streamA)); got.Action != "accept" || got.Content["name"] != "Ada" {
		t.Errorf("session a's server received %+v, want accept with the defaults", got)
	}
	select {
	case r := <-requestsA:
		t.Errorf("session a was asked again: %v", r)
	case r := <-requestsB:
		t.Errorf("session b was asked again: %v", r)
	default:
	}
}
