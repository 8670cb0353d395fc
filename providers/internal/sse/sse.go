// Package sse reads Server-Sent Events streams as LLM providers send them:
// "event:", "data:" (repeated lines joined by newlines), "id:" and
// "retry:" fields, comment lines (": keep-alive") skipped, LF or CRLF line
// endings, a blank line dispatching the event, and events far larger than
// bufio.Scanner's default buffer.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/agentd/agentd/providers/internal/bufpool"
)

// MaxEventSize bounds one event; a larger one is an error, not a crash.
const MaxEventSize = 16 << 20

// Event is one dispatched event.
type Event struct {
	Name string // "event:" field; "" for data-only streams
	Data []byte // "data:" lines joined by "\n"
	ID   string
}

// Reader reads events from a stream. It is not safe for concurrent use.
type Reader struct {
	r *bufio.Reader // nil once closed
}

// NewReader returns a Reader of r, with a buffer from a pool: Close gives
// it back.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufpool.Get(r)}
}

// Close gives the Reader's buffer back to the pool for another response.
// The events it returned stay valid (they never share its buffer); after
// Close, Next returns ErrClosed. Close is idempotent; a Reader never closed
// leaves its buffer to the garbage collector.
func (r *Reader) Close() {
	if r.r == nil {
		return
	}
	bufpool.Put(r.r)
	r.r = nil
}

// ErrEventTooLarge reports an event beyond MaxEventSize.
var ErrEventTooLarge = errors.New("sse: event too large")

// ErrClosed reports a Next after Close.
var ErrClosed = errors.New("sse: reader closed")

// Next returns the next event. At the end of the stream it returns io.EOF;
// an event cut off by the end (no blank line after it) is dispatched if it
// has data, since some servers close without the final blank line. A
// stream cut off mid-line returns io.ErrUnexpectedEOF.
func (r *Reader) Next() (Event, error) {
	if r.r == nil {
		return Event{}, ErrClosed
	}
	var b builder
	size := 0
	for {
		line, err := r.readLine(&size)
		switch {
		case err != nil:
			return b.end(line, err)
		case len(line) > 0:
			b.field(line)
		case b.hasData: // a blank line dispatches the event
			return b.event(), nil
		default:
			b.ev = Event{} // nothing to dispatch
		}
	}
}

// builder gathers an event's fields until it is dispatched.
type builder struct {
	ev      Event
	data    bytes.Buffer
	hasData bool
}

// field takes one line of the event: an "event", "data" or "id" field;
// comment lines and other fields are skipped.
func (b *builder) field(line []byte) {
	if line[0] == ':' {
		return // a comment: keep-alive, OPENROUTER PROCESSING, ...
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "event":
		b.ev.Name = string(value)
	case "data":
		if b.hasData {
			b.data.WriteByte('\n')
		}
		b.data.Write(value)
		b.hasData = true
	case "id":
		b.ev.ID = string(value)
	}
}

func (b *builder) event() Event {
	b.ev.Data = b.data.Bytes()
	return b.ev
}

// end is what Next returns when a read fails with err after line: at a
// clean end of the stream, the event cut off by it if it has data, else
// io.EOF; io.ErrUnexpectedEOF mid-line.
func (b *builder) end(line []byte, err error) (Event, error) {
	switch {
	case !errors.Is(err, io.EOF):
		return Event{}, err
	case line != nil:
		return Event{}, io.ErrUnexpectedEOF
	case b.hasData:
		return b.event(), nil
	}
	return Event{}, io.EOF
}

// readLine reads one line without its LF or CRLF; a nil line with io.EOF
// means the stream ended cleanly between lines. A line that fits the
// buffer is returned in it, valid until the next read: Next copies what it
// keeps.
func (r *Reader) readLine(size *int) ([]byte, error) {
	var line []byte
	for first := true; ; first = false {
		chunk, err := r.r.ReadSlice('\n')
		*size += len(chunk)
		if *size > MaxEventSize {
			return nil, fmt.Errorf("%w (over %d bytes)", ErrEventTooLarge, MaxEventSize)
		}
		if first && err == nil {
			line = chunk
		} else {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if len(line) == 0 {
				return nil, err
			}
			return line, err
		}
		return trimEOL(line), nil
	}
}

// trimEOL cuts a line's LF or CRLF; an empty line is empty, not nil.
func trimEOL(line []byte) []byte {
	line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
	if line == nil {
		return []byte{}
	}
	return line
}
