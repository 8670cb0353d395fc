package httpapi

import (
	"encoding/binary"
	"net/http/httptest"
	"testing"

	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// grpcMessage is res as the gRPC server writes it: its prefix, then its
// encoding.
func grpcMessage(t *testing.T, data string) []byte {
	t.Helper()
	msg, err := proto.Marshal(&agentdv1.StreamGenerationEventsResponse{Chunk: &httpbody.HttpBody{ContentType: "text/event-stream", Data: []byte(data)}})
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
}

// The chunk writer writes each message's data once the message is
// whole, however the gRPC server splits what it writes: a prefix and its
// message apart (as it does), both at once, several messages at once,
// a byte at a time.
func TestChunkWriterPieces(t *testing.T) {
	t.Parallel()
	a, b := grpcMessage(t, "id: 1\n\n"), grpcMessage(t, "id: 2\n\n")
	for _, tc := range []struct {
		name   string
		writes [][]byte
	}{
		{"prefix and message apart", [][]byte{a[:5], a[5:], b[:5], b[5:]}},
		{"each whole", [][]byte{a, b}},
		{"both at once", [][]byte{append(append([]byte(nil), a...), b...)}},
		{"across messages", [][]byte{a[:3], append(append([]byte(nil), a[3:]...), b[:9]...), b[9:]}},
		{"a byte at a time", byteWrites(append(append([]byte(nil), a...), b...))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			c := &chunkWriter{w: rec, header: make(map[string][]string)}
			for _, p := range tc.writes {
				if n, err := c.Write(p); n != len(p) || err != nil {
					t.Fatalf("Write of %d bytes: %d, %v", len(p), n, err)
				}
			}
			if got := rec.Body.String(); got != "id: 1\n\nid: 2\n\n" {
				t.Errorf("body %q; want both chunks' data", got)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q; want the chunks'", ct)
			}
		})
	}
}

// byteWrites is p a byte at a time.
func byteWrites(p []byte) [][]byte {
	out := make([][]byte, len(p))
	for i := range p {
		out[i] = p[i : i+1]
	}
	return out
}
