package mcpconn

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync/atomic"
)

// jsonLines passes through the lines of a stdio server's stdout that can be
// JSON-RPC messages and drops the rest (banners, stray log lines), which
// would otherwise end the session: the SDK's decoder fails on the first
// byte that is not JSON. Lines are judged by their first non-blank bytes
// (see mayBeJSONRPC). A kept line longer than max bytes ends the stream
// with errMessageTooLarge: the SDK would buffer all of it.
type jsonLines struct {
	r       *bufio.Reader
	onDrop  func(line []byte) // called with (the start of) each dropped line
	pending []byte            // rest of the current kept line, not yet returned
	midLine bool              // the last chunk read did not end its line
	keeping bool              // the current line is being kept
	lineLen int               // bytes of the current line so far
	max     int               // longest kept line allowed (0: no limit)
	err     error             // read error to return once pending is empty
	tooLong atomic.Bool       // the stream ended with errMessageTooLarge
}

// errMessageTooLarge ends a stdout stream whose message exceeds the limit.
var errMessageTooLarge = errors.New("mcpconn: the server wrote a message larger than the limit")

func newJSONLines(r io.Reader, max int, onDrop func([]byte)) *jsonLines {
	return &jsonLines{r: bufio.NewReaderSize(r, 64<<10), max: max, onDrop: onDrop}
}

// overflowed reports whether the stream ended on a message over the limit.
func (j *jsonLines) overflowed() bool { return j.tooLong.Load() }

func (j *jsonLines) Read(p []byte) (int, error) {
	for {
		if len(j.pending) > 0 {
			n := copy(p, j.pending)
			j.pending = j.pending[n:]
			return n, nil
		}
		if j.err != nil {
			return 0, j.err
		}
		chunk, err := j.r.ReadSlice('\n')
		if len(chunk) > 0 {
			if !j.midLine {
				j.lineLen = 0
				j.keeping = mayBeJSONRPC(chunk)
				if !j.keeping && j.onDrop != nil {
					j.onDrop(bytes.TrimRight(chunk, "\r\n"))
				}
			}
			j.lineLen += len(chunk)
			if j.keeping && j.max > 0 && j.lineLen > j.max {
				j.tooLong.Store(true)
				j.err = errMessageTooLarge
				continue
			}
			if j.keeping {
				// ReadSlice's buffer is reused by the next read, which
				// happens only after pending is consumed.
				j.pending = chunk
			}
			j.midLine = chunk[len(chunk)-1] != '\n'
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) && j.err == nil {
			j.err = err
		}
	}
}

// mayBeJSONRPC reports whether a line, judged by its start, can be a
// JSON-RPC message (an object) or batch (an array of objects). Blank lines
// are harmless to the decoder and kept. A log line such as "[INFO] ready"
// starts with '[' too, so an array must open with '{' (or be empty).
func mayBeJSONRPC(start []byte) bool {
	t := bytes.TrimLeft(start, " \t\r\n")
	if len(t) == 0 || t[0] == '{' {
		return true
	}
	if t[0] != '[' {
		return false
	}
	t = bytes.TrimLeft(t[1:], " \t\r\n")
	return len(t) == 0 || t[0] == '{' || t[0] == ']'
}
