package httpc

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/agentd/agentd/providers"
)

// Marshal encodes a request body to the bytes json.Marshal gives it, but
// appends the tool schemas the tool loop encoded once for the generation
// (providers.CompactJSON, from providers.Request.Parameters) as they are.
// json.Marshal calls such a value's MarshalJSON and then scans and
// compacts what it returns, on every turn: with a dozen tools that was
// three quarters of a Chat Completions body's encoding, and 6% of agentd's
// CPU under load.
//
// The body's maps and lists (map[string]any, []any, and values that
// encode themselves, bodyValue) are walked here, keys sorted as
// json.Marshal sorts them, and its strings, booleans and integers written
// here as json.Marshal writes them; every other value is json.Marshal's.
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
			e.str(k)
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
	case string:
		e.str(v)
		return nil
	case bool:
		e.buf.WriteString(strconv.FormatBool(v))
		return nil
	case int:
		e.buf.Write(strconv.AppendInt(e.buf.AvailableBuffer(), int64(v), 10))
		return nil
	case int64:
		e.buf.Write(strconv.AppendInt(e.buf.AvailableBuffer(), v, 10))
		return nil
	case providers.CompactJSON:
		if len(v) == 0 {
			break // json.Marshal's error
		}
		e.buf.Write(v)
		return nil
	case *providers.CompactJSON:
		if v == nil || len(*v) == 0 {
			break // json.Marshal's null, or its error
		}
		e.buf.Write(*v)
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

// str appends s as json.Marshal encodes a string: quoted, with '"', '\\'
// and control characters escaped (\b, \f, \n, \r and \t by name), '<',
// '>' and '&' as \u003c, \u003e and \u0026 (HTML-safe), U+2028 and
// U+2029 escaped, and each byte of invalid UTF-8 replaced by \ufffd.
func (e *bodyEncoder) str(s string) {
	const hex = "0123456789abcdef"
	b := e.buf.AvailableBuffer()
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	b = append(b, '"')
	e.buf.Write(b)
}
