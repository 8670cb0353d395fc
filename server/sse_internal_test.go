package server

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// An event stream writes every event its follow passed, even those still
// gathered for the next chunk when the follow returns: the end of a
// generation, passed at once after the events before it, is its last
// chunk, never lost to the stream's end, and comes before the error event
// of a generation that failed.
func TestStreamWritesEveryEventBeforeTheEnd(t *testing.T) {
	t.Parallel()
	const events = 3
	for _, ended := range []error{nil, status.Error(codes.Unavailable, "the provider is down")} {
		var sent []byte
		w := &sseStream{blocks: &genBlocks{}, send: func(res *agentdv1.StreamGenerationEventsResponse) error {
			sent = append(sent, res.GetChunk().GetData()...)
			return nil
		}}
		for seq := range int64(events) {
			if err := w.event(&agentdv1.GenerateResponse{Sequence: seq + 1, Event: &agentdv1.GenerateResponse_Usage{}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.end(t.Context(), ended); err != nil {
			t.Fatal(err)
		}
		if got := bytes.Count(sent, []byte("event: usage\n")); got != events {
			t.Errorf("after %v, the stream wrote %d events in %q; want %d", ended, got, sent, events)
		}
		if last := bytes.LastIndex(sent, []byte("event: usage\n")); ended != nil && bytes.Index(sent, []byte("event: error\n")) < last {
			t.Errorf("after %v, the stream wrote %q; want the error event last", ended, sent)
		}
	}
}
