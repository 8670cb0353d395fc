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
	var ev Event
	var data bytes.Buffer
	hasData := false
	size := 0
	for {
		line, err := r.readLine(&size)
		if err != nil {
			if errors.Is(err, io.EOF) && line == nil {
				if hasData {
					ev.Data = data.Bytes()
					return ev, nil
				}
				return Event{}, io.EOF
			}
			if errors.Is(err, io.EOF) {
				return Event{}, io.ErrUnexpectedEOF
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if hasData {
				ev.Data = data.Bytes()
				return ev, nil
			}
			ev = Event{}
			continue
		}
		if line[0] == ':' {
			continue // a comment: keep-alive, OPENROUTER PROCESSING, ...
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Name = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		case "id":
			ev.ID = string(value)
		}
	}
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
		line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
		if line == nil {
			line = []byte{}
		}
		return line, nil
	}
}
