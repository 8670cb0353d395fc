package sse

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzStream proves that the Reader survives any byte stream, whatever
// its chunking: it never panics, returns at most one event per line, ends
// with io.EOF when the stream ends at a line end and io.ErrUnexpectedEOF
// when it is cut mid-line, and returns exactly the events that a plain
// line-by-line reading of the format in the package doc gives.
func FuzzStream(f *testing.F) {
	for _, s := range []string{
		"",
		"\n",
		"data: {\"a\":1}\n\ndata: [DONE]\n\n",
		"event: message_start\ndata: {}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n",
		": keep-alive\n\n: OPENROUTER PROCESSING\ndata: x\n\n",
		"event: e\r\ndata: a\r\n\r\n",
		"data: a\ndata: b\n\n",
		"data:x\nid:7\nretry: 100\n\n",
		"data\n\ndata:\n\ndata: \n\n",
		"data: a\n\ndata: b\n",
		"data: a\n\ndata: b",
		"event: x\n\ndata: y\n\n",
		"event: x\nid: 1\n\n\n\n",
		"data:  two spaces\r\ndata:\r\r\n\r\n",
		"\r\n\r\n:\r\nid\r\nevent\r\ndata\r\n",
		"data: \x00\xff\xfe\n\n",
		"id: a\ndata: 1\n\ndata: 2\n\n",
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunking uint8) {
		wantEvents, wantErr := readModel(data)
		events, err := readAll(NewReader(chunked(data, chunking)), len(data)+1)
		if !errors.Is(err, wantErr) {
			t.Fatalf("the stream %q ended with %v, want %v", data, err, wantErr)
		}
		if diff := cmp.Diff(wantEvents, events, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("events of %q (-want +got):\n%s", data, diff)
		}
	})
}

// FuzzRoundTrip proves that events written the ways servers write them
// read back as they were: LF or CRLF line ends, comments, blank lines,
// fields the reader ignores, a data-less event, "event:" and "id:" lines
// anywhere among the data lines, the space after the colon omitted where
// the value allows, the last blank line missing, any chunking, and data
// lines far larger than the read buffer. An event whose Next call reads
// more than MaxEventSize bytes (its own lines, and the comments and
// data-less lines since the previous event) is ErrEventTooLarge; one of
// at most MaxEventSize bytes is not.
//
// spec lists the events: records separated by 0x1e, each "data[\x1f
// name[\x1f id]]", with "\n" separating data lines. layout seeds the
// choice of line ends, extra lines and chunking. size's top byte chooses
// a padding of the first event's data, rarely, since large inputs are
// slow: none (below 0xf0), up to 192 KiB (0xf0–0xfe), or MaxEventSize
// give or take 32 bytes (0xff).
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("{\"type\":\"message_start\"}\x1fmessage_start\x1e{\"type\":\"ping\"}\x1fping\x1e[DONE]"), uint64(0), uint32(0))
	f.Add([]byte("line one\nline two\n\nline four\x1fdelta\x1f42"), uint64(7), uint32(0))
	f.Add([]byte(" leading space\x1f spaced name\x1f id with: colon"), uint64(3), uint32(0))
	f.Add([]byte("\x1e\x1e"), uint64(99), uint32(0))
	f.Add([]byte("x\x1fa\x1e:not a comment\x1f:b"), uint64(1<<60|5), uint32(0))
	f.Add([]byte("tail"), uint64(2<<60|11), uint32(0xf0<<24|64<<10))
	f.Add([]byte("big\x1fe"), uint64(3<<60), uint32(0xf8<<24|(128<<10)+1))
	f.Add([]byte("at the limit\x1fe\x1e{}"), uint64(4), uint32(0xff<<24|32))
	f.Add([]byte("one byte over\x1fe\x1e{}"), uint64(4), uint32(0xff<<24|33))
	f.Fuzz(func(t *testing.T, spec []byte, layout uint64, size uint32) {
		events := parseSpec(spec)
		pad := 0
		switch mode := size >> 24; {
		case mode == 0xff:
			w := encode(events, layout)
			target := MaxEventSize - 32 + int(size%64)
			pad = max(0, target-w.spans[0])
		case mode >= 0xf0:
			pad = int(size % (192 << 10))
		}
		if pad > 0 {
			events[0].Data = append(bytes.Repeat([]byte("x"), pad), events[0].Data...)
		}
		w := encode(events, layout)
		chunking := uint8(layout >> 60)
		if len(w.stream) > 1<<20 {
			chunking = 0 // one-byte reads of megabytes are slow, not interesting
		}
		got, err := readAll(NewReader(chunked(w.stream, chunking)), len(events)+1)
		want, wantErr := events, error(io.EOF)
		for i, n := range w.spans {
			if n > MaxEventSize {
				want, wantErr = events[:i], ErrEventTooLarge
				break
			}
		}
		if !errors.Is(err, wantErr) {
			t.Fatalf("reading %d events back (spans %v) ended with %v, want %v", len(events), w.spans, err, wantErr)
		}
		if !slices.EqualFunc(want, got, sameEvent) {
			if len(w.stream) > 1<<10 {
				t.Fatalf("read %d events back from %d bytes (spans %v), want %d, or they differ", len(got), len(w.stream), w.spans, len(want))
			}
			t.Fatalf("events read back from %q (-want +got):\n%s", w.stream, cmp.Diff(want, got, cmpopts.EquateEmpty()))
		}
	})
}

func sameEvent(a, b Event) bool {
	return a.Name == b.Name && a.ID == b.ID && bytes.Equal(a.Data, b.Data)
}

// readAll reads events until an error, failing past limit events: the
// reader must make progress on every call.
func readAll(r *Reader, limit int) ([]Event, error) {
	var events []Event
	for {
		ev, err := r.Next()
		if err != nil {
			return events, err
		}
		events = append(events, ev)
		if len(events) > limit {
			return events, errors.New("more events than the stream has lines")
		}
	}
}

// chunked returns a reader of data: whole (0 and 4–15), one byte at a
// time (1), seven bytes at a time (2), or with io.EOF alongside the last
// bytes (3).
func chunked(data []byte, chunking uint8) io.Reader {
	switch chunking % 16 {
	case 1:
		return iotest.OneByteReader(bytes.NewReader(data))
	case 2:
		return &chunkReader{data: data, n: 7}
	case 3:
		return iotest.DataErrReader(bytes.NewReader(data))
	}
	return bytes.NewReader(data)
}

type chunkReader struct {
	data []byte
	n    int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.n)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// readModel reads data as the package doc describes the format, one
// complete line at a time, with no size limit.
func readModel(data []byte) ([]Event, error) {
	var events []Event
	var ev Event
	hasData := false
	for len(data) > 0 {
		line, rest, complete := bytes.Cut(data, []byte("\n"))
		if !complete {
			return events, io.ErrUnexpectedEOF
		}
		data = rest
		line = bytes.TrimSuffix(line, []byte("\r"))
		switch {
		case len(line) == 0:
			if hasData {
				events = append(events, ev)
			}
			ev, hasData = Event{}, false
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				ev.Name = string(value)
			case "data":
				if hasData {
					ev.Data = append(ev.Data, '\n')
				}
				ev.Data = append(ev.Data, value...)
				hasData = true
			case "id":
				ev.ID = string(value)
			}
		}
	}
	if hasData {
		events = append(events, ev)
	}
	return events, io.EOF
}

// parseSpec turns the fuzz input into events that SSE can carry: names
// and ids without line breaks, data without CR (a line break is "\n").
func parseSpec(spec []byte) []Event {
	noBreaks := strings.NewReplacer("\r", "", "\n", "")
	var events []Event
	for _, rec := range bytes.Split(spec, []byte{0x1e}) {
		fields := bytes.SplitN(rec, []byte{0x1f}, 3)
		ev := Event{Data: bytes.ReplaceAll(fields[0], []byte("\r"), nil)}
		if len(fields) > 1 {
			ev.Name = noBreaks.Replace(string(fields[1]))
		}
		if len(fields) > 2 {
			ev.ID = noBreaks.Replace(string(fields[2]))
		}
		events = append(events, ev)
	}
	return events
}

// written is an encoded stream and, for each event, how many bytes the
// Next call that returns it reads.
type written struct {
	stream []byte
	spans  []int
}

// encode writes events as a server might, with choices drawn from
// layout. The choices do not depend on the length of the first data
// line, so padding it lengthens the first span by as much.
func encode(events []Event, layout uint64) written {
	rng := rand.New(rand.NewPCG(layout, uint64(len(events))))
	var w written
	var buf bytes.Buffer
	eol := func() {
		if rng.IntN(2) == 0 {
			buf.WriteString("\n")
		} else {
			buf.WriteString("\r\n")
		}
	}
	field := func(name, value string) {
		buf.WriteString(name)
		buf.WriteString(":")
		// Draw whatever the value, so the first event's padding changes
		// no later choice.
		if space := rng.IntN(4) != 0; space || strings.HasPrefix(value, " ") {
			buf.WriteString(" ")
		}
		buf.WriteString(value)
		eol()
	}
	extra := func() {
		for range rng.IntN(3) {
			switch rng.IntN(5) {
			case 0:
				buf.WriteString(": keep-alive")
				eol()
			case 1:
				eol()
			case 2:
				field("retry", "3000")
			case 3:
				field("event", "without data") // not dispatched
				eol()
			case 4:
				buf.WriteString("unknown")
				eol()
			}
		}
	}
	start := 0
	for i, ev := range events {
		extra()
		var lines []func()
		for line := range strings.SplitSeq(string(ev.Data), "\n") {
			lines = append(lines, func() { field("data", line) })
		}
		if ev.Name != "" || rng.IntN(2) == 0 {
			lines = insertAt(lines, rng.IntN(len(lines)+1), func() { field("event", ev.Name) })
		}
		if ev.ID != "" || rng.IntN(4) == 0 {
			lines = insertAt(lines, rng.IntN(len(lines)+1), func() { field("id", ev.ID) })
		}
		if rng.IntN(4) == 0 {
			lines = insertAt(lines, rng.IntN(len(lines)+1), func() { buf.WriteString(":comment: inside"); eol() })
		}
		for _, line := range lines {
			line()
		}
		// The last event may end without its blank line, and then
		// without anything after it.
		if i < len(events)-1 || rng.IntN(3) != 0 {
			eol()
			w.spans = append(w.spans, buf.Len()-start)
			start = buf.Len()
			if i == len(events)-1 {
				extra()
			}
			continue
		}
		w.spans = append(w.spans, buf.Len()-start)
	}
	w.stream = buf.Bytes()
	return w
}

func insertAt(lines []func(), i int, line func()) []func() {
	lines = append(lines, nil)
	copy(lines[i+1:], lines[i:])
	lines[i] = line
	return lines
}
