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
		return e.object(v)
	case []any:
		return e.list(v)
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

// object appends a map as an object, its keys sorted.
func (e *bodyEncoder) object(m map[string]any) error {
	if m == nil {
		e.buf.WriteString("null")
		return nil
	}
	e.buf.WriteByte('{')
	var small [16]string
	keys := slices.AppendSeq(small[:0], maps.Keys(m))
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			e.buf.WriteByte(',')
		}
		e.str(k)
		e.buf.WriteByte(':')
		if err := e.value(m[k]); err != nil {
			return err
		}
	}
	e.buf.WriteByte('}')
	return nil
}

// list appends a list as an array.
func (e *bodyEncoder) list(l []any) error {
	if l == nil {
		e.buf.WriteString("null")
		return nil
	}
	e.buf.WriteByte('[')
	for i, item := range l {
		if i > 0 {
			e.buf.WriteByte(',')
		}
		if err := e.value(item); err != nil {
			return err
		}
	}
	e.buf.WriteByte(']')
	return nil
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
	b := e.buf.AvailableBuffer()
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			i++
			if escapedASCII[c] {
				b = appendEscaped(append(b, s[start:i-1]...), c)
				start = i
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if esc := runeEscape(r, size); esc != "" {
			b = append(append(b, s[start:i]...), esc...)
			start = i + size
		}
		i += size
	}
	b = append(b, s[start:]...)
	b = append(b, '"')
	e.buf.Write(b)
}

// escapedASCII are the ASCII bytes json.Marshal escapes in a string:
// control characters, '"', '\\', and '<', '>' and '&' (HTML-safe).
var escapedASCII = [utf8.RuneSelf]bool{
	0x00: true, 0x01: true, 0x02: true, 0x03: true, 0x04: true, 0x05: true, 0x06: true, 0x07: true,
	0x08: true, 0x09: true, 0x0a: true, 0x0b: true, 0x0c: true, 0x0d: true, 0x0e: true, 0x0f: true,
	0x10: true, 0x11: true, 0x12: true, 0x13: true, 0x14: true, 0x15: true, 0x16: true, 0x17: true,
	0x18: true, 0x19: true, 0x1a: true, 0x1b: true, 0x1c: true, 0x1d: true, 0x1e: true, 0x1f: true,
	'"': true, '\\': true, '<': true, '>': true, '&': true,
}

// namedEscapes are the escapes json.Marshal writes by name, by the byte
// they stand for; it writes the others as \u00XX.
var namedEscapes = [utf8.RuneSelf]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// appendEscaped appends the escape of ASCII byte c.
func appendEscaped(b []byte, c byte) []byte {
	const hex = "0123456789abcdef"
	if n := namedEscapes[c]; n != 0 {
		return append(b, '\\', n)
	}
	return append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}

// runeEscape is what json.Marshal writes for the rune r of size bytes
// instead of the rune itself: \ufffd for a byte of invalid UTF-8, and
// U+2028 and U+2029 escaped; "" for any other.
func runeEscape(r rune, size int) string {
	switch {
	case r == utf8.RuneError && size == 1:
		return `\ufffd`
	case r == '\u2028':
		return `\u2028`
	case r == '\u2029':
		return `\u2029`
	}
	return ""
}
