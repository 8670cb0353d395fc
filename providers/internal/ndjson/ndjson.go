// Package ndjson reads newline-delimited JSON streams (Ollama's native
// API): one JSON value per line, blank lines skipped, CRLF accepted, lines
// far larger than bufio.Scanner's default buffer.
package ndjson

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/agentd/agentd/providers/internal/bufpool"
)

// MaxLineSize bounds one line.
const MaxLineSize = 16 << 20

// ErrLineTooLarge reports a line beyond MaxLineSize.
var ErrLineTooLarge = errors.New("ndjson: line too large")

// Reader reads lines from a stream. It is not safe for concurrent use.
type Reader struct {
	r *bufio.Reader // nil once closed
}

// NewReader returns a Reader of r, with a buffer from a pool: Close gives
// it back.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufpool.Get(r)}
}

// Close gives the Reader's buffer back to the pool for another response.
// The lines it returned stay valid (they never share its buffer); after
// Close, Next returns ErrClosed. Close is idempotent; a Reader never closed
// leaves its buffer to the garbage collector.
func (r *Reader) Close() {
	if r.r == nil {
		return
	}
	bufpool.Put(r.r)
	r.r = nil
}

// ErrClosed reports a Next after Close.
var ErrClosed = errors.New("ndjson: reader closed")

// Next returns the next non-blank line, without its line ending; io.EOF at
// the end. A last line without a newline is returned as a line; a line
// that a read error other than io.EOF cut off is not: the error is.
func (r *Reader) Next() ([]byte, error) {
	if r.r == nil {
		return nil, ErrClosed
	}
	for {
		line, err := r.readLine()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			return trimmed, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// readLine reads up to and including the next newline, or to the end of
// the stream, and the error that ended the read there.
func (r *Reader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxLineSize {
			return nil, fmt.Errorf("%w (over %d bytes)", ErrLineTooLarge, MaxLineSize)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}
