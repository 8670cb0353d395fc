package server

import (
	"bytes"
	"context"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// An event stream writes every event its follow passed, even those still
// waiting for the writer when the follow returns: the end of a
// generation, passed at once after the events before it, is its last
// chunk, never lost to the stream's end.
func TestRelayWritesEveryEventBeforeTheEnd(t *testing.T) {
	t.Parallel()
	const events = 3
	for range 20 { // which of two ready cases a select takes is random
		followed := make(chan struct{})
		var sent [][]byte
		w := sseStream{blocks: &genBlocks{}, send: func(res *agentdv1.StreamGenerationEventsResponse) error {
			if sent == nil { // the heartbeat: the follow has passed every event and returned meanwhile
				<-followed
			}
			sent = append(sent, res.GetChunk().GetData())
			return nil
		}}
		err := w.relay(t.Context(), func(_ context.Context, out func(*agentdv1.GenerateResponse) error) error {
			defer close(followed)
			for seq := range int64(events) {
				if err := out(&agentdv1.GenerateResponse{Sequence: seq + 1, Event: &agentdv1.GenerateResponse_Usage{}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Count(bytes.Join(sent, nil), []byte("event: usage\n")); got != events {
			t.Fatalf("the stream wrote %d events in %q; want %d", got, sent, events)
		}
	}
}
