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
// would otherwise end the session: the decoder fails on the first line
// that is not JSON. Lines are judged by their first non-blank bytes (see
// mayBeJSONRPC). A kept line longer than max bytes ends the stream with
// errMessageTooLarge, before it is buffered whole.
//
// next hands out whole kept lines, for the connection's reader (lineConn).
type jsonLines struct {
	r       *bufio.Reader
	onDrop  func(line []byte) // called with (the start of) each dropped line
	max     int               // longest kept line allowed (0: no limit)
	long    []byte            // a kept line longer than r's buffer, assembled
	err     error             // what ended the stream, returned from then on
	tooLong atomic.Bool       // the stream ended with errMessageTooLarge
}

// errMessageTooLarge ends a stdout stream whose message exceeds the limit.
var errMessageTooLarge = errors.New("mcpconn: the server wrote a message larger than the limit")

// keptLongBuffer is the largest assembly buffer kept for the next long
// line; a larger one, left by a rare huge message, is given back.
const keptLongBuffer = 1 << 20

func newJSONLines(r io.Reader, max int, onDrop func([]byte)) *jsonLines {
	return &jsonLines{r: bufio.NewReaderSize(r, 64<<10), max: max, onDrop: onDrop}
}

// overflowed reports whether the stream ended on a message over the limit;
// false for nil (an HTTP connection has no stdout).
func (j *jsonLines) overflowed() bool { return j != nil && j.tooLong.Load() }

// next returns the next kept line with its line end; the stream's last
// line may have none, and then comes with the error that ended the stream
// (io.EOF on a clean end). The line is valid until the next call: a line
// that fits the reader's buffer is not copied. Once the stream has ended,
// next returns no line and that error. Not safe for concurrent use.
func (j *jsonLines) next() ([]byte, error) {
	if cap(j.long) > keptLongBuffer {
		j.long = nil
	}
	for j.err == nil {
		line, err := j.r.ReadSlice('\n')
		if len(line) == 0 {
			j.err = err
			break
		}
		keep := mayBeJSONRPC(line)
		if !keep && j.onDrop != nil {
			j.onDrop(bytes.TrimRight(line, "\r\n"))
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			line, err = j.rest(line, keep)
		} else if keep && j.over(len(line)) {
			line, err = nil, errMessageTooLarge
		}
		j.err = err
		if keep && line != nil {
			return line, err
		}
	}
	return nil, j.err
}

// rest reads the rest of a line longer than the reader's buffer, whose
// first chunk is first: a kept line is assembled in j.long, a dropped one
// skipped. The error is the one that ended the line, if not its '\n'.
func (j *jsonLines) rest(first []byte, keep bool) ([]byte, error) {
	if keep {
		j.long = append(j.long[:0], first...)
	}
	n := len(first)
	for {
		chunk, err := j.r.ReadSlice('\n')
		n += len(chunk)
		if keep && j.over(n) {
			return nil, errMessageTooLarge
		}
		if keep {
			j.long = append(j.long, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if !keep {
				return nil, err
			}
			return j.long, err
		}
	}
}

// over reports whether a kept line of n bytes is over the limit, and
// notes it if so.
func (j *jsonLines) over(n int) bool {
	if j.max > 0 && n > j.max {
		j.tooLong.Store(true)
		return true
	}
	return false
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
