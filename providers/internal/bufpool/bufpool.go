// Package bufpool pools the 64 KiB buffered readers the stream readers
// (sse, ndjson) put in front of a response: allocating one per response
// was a quarter of the bytes agentd allocated in a generation.
package bufpool

import (
	"bufio"
	"io"
	"sync"
)

// Size is a pooled reader's buffer.
const Size = 64 << 10

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, Size) }}

// Get returns a pooled reader of r.
func Get(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

// Put gives br back, keeping no reference to its stream. Nothing may read
// br afterwards.
func Put(br *bufio.Reader) {
	br.Reset(nil)
	readers.Put(br)
}
