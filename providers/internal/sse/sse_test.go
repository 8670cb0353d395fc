package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestReader(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 200<<10)
	tests := []struct {
		name, in string
		want     []Event
	}{
		{"data only with DONE", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []Event{{Data: []byte(`{"a":1}`)}, {Data: []byte("[DONE]")}}},
		{"named events", "event: message_start\ndata: {}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n", []Event{{Name: "message_start", Data: []byte("{}")}, {Name: "ping", Data: []byte(`{"type": "ping"}`)}}},
		{"comments skipped", ": keep-alive\n\n: OPENROUTER PROCESSING\ndata: x\n\n", []Event{{Data: []byte("x")}}},
		{"CRLF", "event: e\r\ndata: a\r\n\r\n", []Event{{Name: "e", Data: []byte("a")}}},
		{"multi-line data", "data: a\ndata: b\n\n", []Event{{Data: []byte("a\nb")}}},
		{"no space after colon", "data:x\nid:7\n\n", []Event{{Data: []byte("x"), ID: "7"}}},
		{"large event", "data: " + big + "\n\n", []Event{{Data: []byte(big)}}},
		{"last event without blank line", "data: a\n\ndata: b\n", []Event{{Data: []byte("a")}, {Data: []byte("b")}}},
		{"event without data is not dispatched", "event: x\n\ndata: y\n\n", []Event{{Data: []byte("y")}}},
	}
	for _, tc := range tests {
		for _, reader := range []struct {
			name string
			wrap func(io.Reader) io.Reader
		}{{"whole", func(r io.Reader) io.Reader { return r }}, {"one byte at a time", iotest.OneByteReader}} {
			t.Run(tc.name+"/"+reader.name, func(t *testing.T) {
				t.Parallel()
				r := NewReader(reader.wrap(strings.NewReader(tc.in)))
				var got []Event
				for {
					ev, err := r.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, ev)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestTruncated(t *testing.T) {
	t.Parallel()
	r := NewReader(strings.NewReader("data: {\"a\":"))
	if _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a stream cut mid-line: %v, want ErrUnexpectedEOF", err)
	}
}

// TestPooledBuffer: a closed Reader's buffer serves the next
// one, and the events it returned keep their bytes; a closed Reader reads
// nothing more.
func TestPooledBuffer(t *testing.T) {
	t.Parallel()
	r1 := NewReader(strings.NewReader("event: first\ndata: one\n\ndata: rest\n\n"))
	ev, err := r1.Next()
	if err != nil {
		t.Fatal(err)
	}
	r1.Close()
	r1.Close() // idempotent
	if _, err := r1.Next(); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v, want ErrClosed", err)
	}
	for range 10 { // whichever reader gets the pooled buffer overwrites it
		r2 := NewReader(strings.NewReader("event: other\ndata: two\n\n"))
		if _, err := r2.Next(); err != nil {
			t.Fatal(err)
		}
		r2.Close()
	}
	if diff := cmp.Diff(Event{Name: "first", Data: []byte("one")}, ev); diff != "" {
		t.Errorf("the event read before Close changed (-want +got):\n%s", diff)
	}
}
