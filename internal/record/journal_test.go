package record_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
)

func text(s string) *agentdv1.GenerateResponse {
	return &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: s}}}
}

func newJournal(t *testing.T, gens store.Generations, live *record.Live, id string) *record.Journal {
	t.Helper()
	o := record.Options{Store: gens, Tenant: "t", ID: id, Owner: "replica-1", TTL: time.Minute, Live: live,
		Stop: func(err error) { t.Errorf("the generation is stopped: %v", err) },
		Warn: func(msg string, err error) { t.Errorf("%s: %v", msg, err) },
	}
	j, _, err := record.Create(t.Context(), o, &statev1.Checkpoint{Version: record.Version, GenerationId: id})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// X-G2: a stream that follows a generation gets every event after the
// one it names, each once and in order: those stored already, then each
// as it is stored while the generation runs here, and its end.
func TestFollowWhileItRuns(t *testing.T) {
	t.Parallel()
	gens := newStore(t).Generations()
	live := &record.Live{}
	j := newJournal(t, gens, live, "gen_1")
	j.Record(text("a"))
	j.Record(text("b"))
	if err := j.Await(t.Context()); err != nil {
		t.Fatal(err)
	}
	log := &record.Log{Store: gens, Live: live, Adopt: func(context.Context, string, string) bool { return false }, Stopping: func() bool { return false }}
	var got []string
	first := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- log.Follow(t.Context(), "t", "gen_1", 1, func(ev *agentdv1.GenerateResponse) error {
			got = append(got, ev.GetTextDelta().GetText())
			if len(got) == 1 {
				close(first)
			}
			return nil
		})
	}()
	<-first // following: the rest comes live
	j.Record(text("c"))
	j.Settle(t.Context(), store.Completed, record.EncodeResult(nil, nil, nil))
	if err := <-done; err != nil {
		t.Fatalf("Follow: %v", err)
	}
	if want := []string{"b", "c"}; !slices.Equal(got, want) {
		t.Errorf("followed %q; want %q", got, want)
	}
}

// X-G2: a generation that failed ends its followers with its own status,
// read from its record.
func TestFollowAFailedGeneration(t *testing.T) {
	t.Parallel()
	gens := newStore(t).Generations()
	j := newJournal(t, gens, nil, "gen_1")
	j.Record(text("a"))
	j.Settle(t.Context(), store.Failed, record.EncodeResult(nil, nil, fault.New(fault.Unavailable, "the provider is down")))
	log := &record.Log{Store: gens, Adopt: func(context.Context, string, string) bool { return false }, Stopping: func() bool { return false }}
	n := 0
	err := log.Follow(t.Context(), "t", "gen_1", 0, func(*agentdv1.GenerateResponse) error { n++; return nil })
	if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != "the provider is down" || n != 1 {
		t.Errorf("Follow: %d events, %v; want 1 event, then UNAVAILABLE with the failure's message", n, err)
	}
}
