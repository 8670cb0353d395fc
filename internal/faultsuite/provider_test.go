package faultsuite

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// fakeAPI is an OpenAI Chat Completions endpoint answering every request
// with answer; it counts the requests.
type fakeAPI struct {
	srv      *httptest.Server
	requests atomic.Int32
}

func newFakeAPI(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *fakeAPI {
	t.Helper()
	api := &fakeAPI{}
	api.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.requests.Add(1)
		answer(w, r)
	}))
	t.Cleanup(api.srv.Close)
	return api
}

// start is a generation of the openai provider with the demo-free agent.
func openaiStart() *agentdv1.StartGeneration {
	return &agentdv1.StartGeneration{
		Agent:    &agentdv1.Agent{Provider: "openai", Model: "gpt-4o-mini"},
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}}}},
	}
}

// stormStatus answers every request with status, asking for an immediate
// retry.
func stormStatus(status int) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After-Ms", "0")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"storm %d","type":"server_error"}}`, status)
	}
}

// A provider that answers every attempt with 429, 529 or 503 is retried
// max_retries times, then the generation fails with the classified code.
func TestProviderStorms(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   codes.Code
	}{
		{http.StatusTooManyRequests, codes.ResourceExhausted},
		{529, codes.Unavailable},
		{http.StatusServiceUnavailable, codes.Unavailable},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			api := newFakeAPI(t, stormStatus(tc.status))
			s := newStack(t, withProvider(api.srv.URL))
			o := s.run(t, t.Context(), openaiStart())
			wantStatus(t, o, tc.code, "openai", fmt.Sprintf("storm %d", tc.status))
			if n := api.requests.Load(); n != 3 {
				t.Errorf("the API got %d requests; want 3 (max_retries 2)", n)
			}
		})
	}
}

// A stream cut off mid-event, and a stream holding invalid JSON, fail the
// generation as Unavailable, the text so far having been streamed.
func TestProviderBrokenStreams(t *testing.T) {
	for _, tc := range []struct {
		name, body, fact string
	}{
		{"truncated mid-event", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hel\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"del", "openai"},
		{"invalid JSON", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hel\"}}]}\n\ndata: {not json}\n\n", "invalid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, tc.body)
			})
			s := newStack(t, withProvider(api.srv.URL))
			o := s.run(t, t.Context(), openaiStart())
			wantStatus(t, o, codes.Unavailable, tc.fact)
			if len(o.events) < 2 || o.events[1].GetTextDelta().GetText() != "hel" {
				t.Errorf("events %v; want started, then the text streamed before the break", o.events)
			}
		})
	}
}

// A client that goes away while the model streams ends the generation:
// the provider request is cancelled and nothing is left behind.
func TestClientGoneMidStream(t *testing.T) {
	cancelled := make(chan struct{})
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hel\"}}]}\n\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		close(cancelled)
	})
	s := newStack(t, withProvider(api.srv.URL))
	ctx, cancel := context.WithCancel(t.Context())
	o := s.runWith(t, ctx, openaiStart(), func(o outcome) {
		if o.events[len(o.events)-1].GetTextDelta() != nil {
			cancel()
		}
	})
	if o.status.Code() != codes.Canceled {
		t.Errorf("the client saw %v; want Canceled", o.status.Code())
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Error("the provider request was never cancelled")
	}
}
