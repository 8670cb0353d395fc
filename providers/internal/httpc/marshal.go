package httpc

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/agentd/agentd/providers"
)

// Marshal encodes a request body to the bytes json.Marshal gives it, but
// appends the tool schemas the tool loop encoded once for the generation
// (providers.CompactJSON, from providers.Request.Parameters) as they are.
// json.Marshal calls such a value's MarshalJSON and then scans and
// compacts what it returns, on every turn: with a dozen tools that was
// three quarters of a Chat Completions body's encoding, and 6% of agentd's
// CPU under load (issue 15).
//
// The body's maps and lists (map[string]any, []any, and values that
// encode themselves, bodyValue) are walked here, keys sorted as
// json.Marshal sorts them; every other value is json.Marshal's.
func Marshal(body any) ([]byte, error) {
	e := encoders.Get().(*bodyEncoder)
	defer e.release()
	if err := e.value(body); err != nil {
		return nil, err
	}
	return bytes.Clone(e.buf.Bytes()), nil
}

// encoders keeps bodyEncoders, whose buffers grow to a body's size, for
// the next body: the bytes a request body allocates are then its own.
var encoders = sync.Pool{New: func() any {
	e := &bodyEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	return e
}}

// maxPooledBuffer bounds the buffer a pooled encoder keeps: a body that
// carries a large tool result does not pin its size in the pool.
const maxPooledBuffer = 256 << 10

func (e *bodyEncoder) release() {
	if e.buf.Cap() > maxPooledBuffer {
		return
	}
	e.buf.Reset()
	encoders.Put(e)
}

// bodyValue is a value of a request body that writes its own encoding
// (the wire structs of the adapters' tool lists), so that what it holds
// is walked by Marshal too.
type bodyValue interface {
	encodeBody(e *bodyEncoder) error
}

type bodyEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder // into buf, for the values Marshal does not walk
}

func (e *bodyEncoder) value(v any) error {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			e.buf.WriteString("null")
			return nil
		}
		e.buf.WriteByte('{')
		var small [16]string
		keys := slices.AppendSeq(small[:0], maps.Keys(v))
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				e.buf.WriteByte(',')
			}
			if err := e.json(k); err != nil {
				return err
			}
			e.buf.WriteByte(':')
			if err := e.value(v[k]); err != nil {
				return err
			}
		}
		e.buf.WriteByte('}')
		return nil
	case []any:
		if v == nil {
			e.buf.WriteString("null")
			return nil
		}
		e.buf.WriteByte('[')
		for i, item := range v {
			if i > 0 {
				e.buf.WriteByte(',')
			}
			if err := e.value(item); err != nil {
				return err
			}
		}
		e.buf.WriteByte(']')
		return nil
	case providers.CompactJSON:
		if len(v) == 0 {
			break // json.Marshal's error
		}
		e.buf.Write(v)
		return nil
	case bodyValue:
		return v.encodeBody(e)
	}
	return e.json(v)
}

// json appends v as json.Marshal encodes it.
func (e *bodyEncoder) json(v any) error {
	if err := e.enc.Encode(v); err != nil {
		return err
	}
	e.buf.Truncate(e.buf.Len() - 1) // the newline Encode ends a value with
	return nil
}
