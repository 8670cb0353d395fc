package record

import (
	"encoding/json"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// Result is the summary a finished generation's record keeps: its final
// text, its usage, and why it failed.
type Result struct {
	Text  string          `json:"text,omitempty"`
	Usage json.RawMessage `json:"usage,omitempty"`
	Error string          `json:"error,omitempty"`
	// Code is the gRPC code of Error.
	Code codes.Code `json:"code,omitempty"`
	// Message is the final message (protojson), for GetGeneration.
	Message json.RawMessage `json:"message,omitempty"`
	// Limit is the limit the generation completed at
	// (agentd.v1.LimitReached, protojson), for GetGeneration.
	Limit json.RawMessage `json:"limit,omitempty"`
	// Structured is the answer the agent's output schema accepted
	// (google.protobuf.Value, protojson), for GetGeneration.
	Structured json.RawMessage `json:"structured,omitempty"`
}

// EncodeResult is the result of a generation that ended with its final
// message (nil unless it completed), its usage, and err (nil unless it
// failed or was cancelled), as its record keeps it.
func EncodeResult(final *agentdv1.Message, usage *agentdv1.Usage, err error) []byte {
	r := ended(final, usage)
	if err != nil {
		st := status.Convert(fault.GRPC(err))
		r.Error, r.Code = st.Message(), st.Code()
	}
	b, _ := json.Marshal(r)
	return b
}

// EncodeLimited is the result of a generation that completed at limit,
// with its final message (the model's last) and its usage.
func EncodeLimited(final *agentdv1.Message, usage *agentdv1.Usage, limit *agentdv1.LimitReached) []byte {
	r := ended(final, usage)
	r.Limit, _ = protojson.Marshal(limit)
	b, _ := json.Marshal(r)
	return b
}

// EncodeStructured is the result of a generation that completed with
// the structured answer v, with its final message and its usage.
func EncodeStructured(final *agentdv1.Message, usage *agentdv1.Usage, v *structpb.Value) []byte {
	r := ended(final, usage)
	r.Structured, _ = protojson.Marshal(v)
	b, _ := json.Marshal(r)
	return b
}

// ended is the result of a generation that ended with its final message
// (nil for none) and its usage.
func ended(final *agentdv1.Message, usage *agentdv1.Usage) Result {
	r := Result{Text: textOf(final)}
	if final != nil {
		r.Message, _ = protojson.Marshal(final)
	}
	if u, err := protojson.Marshal(usage); err == nil {
		r.Usage = u
	}
	return r
}

func textOf(m *agentdv1.Message) string {
	var s string
	for _, p := range m.GetParts() {
		s += p.GetText()
	}
	return s
}

// pauseExpired is the result a paused generation's record keeps when its
// pause expired before a resume took it: cancelled by no client,
// DEADLINE_EXCEEDED tells it from one a client cancelled. GetGeneration
// and an attached stream read it like any other.
var pauseExpired = func() []byte {
	b, _ := json.Marshal(Result{Error: "the pause expired (generation.pause_ttl) before a resume", Code: codes.DeadlineExceeded})
	return b
}()

// DecodeResult reads a record's result.
func DecodeResult(data []byte) (Result, error) {
	var r Result
	err := json.Unmarshal(data, &r)
	return r, err
}

// endStatus is how a stream following a generation ends: OK for one that
// completed or paused, its own status for one that failed or was
// cancelled.
func endStatus(rec store.Generation) error {
	if rec.State != store.Failed && rec.State != store.Cancelled {
		return nil
	}
	r, _ := DecodeResult(rec.Result)
	code := r.Code
	if code == codes.OK {
		code = codes.Unknown
		if rec.State == store.Cancelled {
			code = codes.Canceled
		}
	}
	return status.Error(code, r.Error)
}
