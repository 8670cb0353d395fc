package ndjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// FuzzStream proves that the Reader survives any byte stream, whatever
// its chunking: it never panics, makes progress on every call, and
// returns exactly the lines that splitting the stream at "\n" and
// trimming white space gives, blank ones skipped, then io.EOF.
func FuzzStream(f *testing.F) {
	for _, s := range []string{
		"",
		"\n",
		"{}\n",
		"\n\n{\"a\":1}\r\n",
		"{\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"done\":false}\n{\"done\":true,\"eval_count\":3}\n",
		"{\"a\":1}\n  \t \r\n{\"b\":2}",
		"x",
		"\r",
		"\r\r\n\r",
		" {\"padded\": true} \n",
		"\xc2\xa0{}\xc2\x85\n\xe2\x80\xa8\n",
		"\x00\xff\n",
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunking uint8) {
		var want [][]byte
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
				want = append(want, trimmed)
			}
		}
		got, err := readAll(NewReader(chunked(data, chunking)), len(want))
		if !errors.Is(err, io.EOF) {
			t.Fatalf("the stream %q ended with %v, want io.EOF", data, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("lines of %q (-want +got):\n%s", data, diff)
		}
	})
}

// FuzzRoundTrip proves that JSON values written one per line, the ways
// servers write them (LF or CRLF, blank and white-space lines between
// them, spaces around a value, no line end after the last, any chunking,
// lines far larger than the read buffer), read back byte for byte, each
// still valid JSON; and that a line of more than MaxLineSize bytes, its
// line end and surrounding white space included, is an error, while one
// of at most MaxLineSize bytes is not.
//
// spec lists the values, separated by 0x1e: each becomes a JSON string,
// an object holding it, or itself compacted if it is valid JSON. layout
// seeds the choice of line ends, extra lines and chunking. size's top
// byte chooses a padded first value, rarely, since large inputs are slow:
// none (below 0xf0), a string of up to 192 KiB (0xf0–0xfe), or one whose
// line is MaxLineSize bytes give or take 32 (0xff).
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("{\"model\":\"llama3\",\"message\":{\"content\":\"Hi\"},\"done\":false}\x1e{\"done\": true}"), uint64(0), uint32(0))
	f.Add([]byte("plain text\x1e[1, 2,\n 3]\x1e\x1e  \"spaced\"  "), uint64(5), uint32(0))
	f.Add([]byte("\x00\xff\u2028\r\n"), uint64(1<<60|3), uint32(0))
	f.Add([]byte("{}"), uint64(2<<60|9), uint32(0xf0<<24|64<<10))
	f.Add([]byte("{}"), uint64(3<<60|1), uint32(0xfe<<24|(128<<10)+7))
	f.Add([]byte("{\"after\":1}"), uint64(4), uint32(0xff<<24|32))
	f.Add([]byte("{\"after\":1}"), uint64(4), uint32(0xff<<24|33))
	f.Fuzz(func(t *testing.T, spec []byte, layout uint64, size uint32) {
		values := jsonValues(spec, layout)
		mode := size >> 24
		if mode >= 0xf0 {
			values = append([]string{`""`}, values...)
		}
		pad := 0
		switch {
		case mode == 0xff:
			w := encode(values, layout)
			pad = max(0, MaxLineSize-32+int(size%64)-w.lineLens[0])
		case mode >= 0xf0:
			pad = int(size % (192 << 10))
		}
		if pad > 0 {
			values[0] = `"` + strings.Repeat("x", pad) + `"`
		}
		w := encode(values, layout)
		chunking := uint8(layout >> 60)
		if len(w.stream) > 1<<20 {
			chunking = 0 // one-byte reads of megabytes are slow, not interesting
		}
		want, tooLarge := values, false
		for i, n := range w.lineLens {
			if n > MaxLineSize {
				want, tooLarge = values[:i], true
				break
			}
		}
		got, err := readAll(NewReader(chunked(w.stream, chunking)), len(values))
		switch {
		case tooLarge && (err == nil || errors.Is(err, io.EOF)):
			t.Fatalf("a line over MaxLineSize (line lengths %v) ended with %v, want an error", w.lineLens, err)
		case !tooLarge && !errors.Is(err, io.EOF):
			t.Fatalf("reading %d values back (line lengths %v) ended with %v, want io.EOF", len(values), w.lineLens, err)
		}
		if len(got) != len(want) {
			t.Fatalf("read %d lines back, want %d (line lengths %v)", len(got), len(want), w.lineLens)
		}
		for i, line := range got {
			if string(line) != want[i] {
				if len(w.stream) > 1<<20 {
					t.Fatalf("line %d read back differs from the value written, %d bytes", i, len(want[i]))
				}
				t.Fatalf("line %d read back from %q is %q, want %q", i, w.stream, line, want[i])
			}
			if !json.Valid(line) {
				t.Fatalf("line %d read back, %q, is not valid JSON", i, line)
			}
		}
	})
}

// readAll reads lines until an error, failing past limit lines: the
// reader must make progress on every call.
func readAll(r *Reader, limit int) ([][]byte, error) {
	var lines [][]byte
	for {
		line, err := r.Next()
		if err != nil {
			return lines, err
		}
		lines = append(lines, line)
		if len(lines) > limit {
			return lines, errors.New("more lines than the stream has")
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

// jsonValues turns the fuzz input into compact JSON texts, none of which
// spans lines.
func jsonValues(spec []byte, layout uint64) []string {
	rng := rand.New(rand.NewPCG(layout, 1))
	var values []string
	for piece := range bytes.SplitSeq(spec, []byte{0x1e}) {
		var v []byte
		var compact bytes.Buffer
		switch rng.IntN(3) {
		case 0:
			v, _ = json.Marshal(string(piece))
		case 1:
			v, _ = json.Marshal(map[string]string{"text": string(piece)})
		default:
			if json.Compact(&compact, piece) == nil {
				v = compact.Bytes()
			} else {
				v, _ = json.Marshal(string(piece))
			}
		}
		values = append(values, string(v))
	}
	return values
}

// written is an encoded stream and the length of each value's line, its
// line end and surrounding white space included.
type written struct {
	stream   []byte
	lineLens []int
}

// encode writes values one per line, with choices drawn from layout that
// do not depend on the values, so padding the first value lengthens its
// line by as much.
func encode(values []string, layout uint64) written {
	rng := rand.New(rand.NewPCG(layout, 2))
	var w written
	var buf bytes.Buffer
	eol := func() {
		if rng.IntN(2) == 0 {
			buf.WriteString("\n")
		} else {
			buf.WriteString("\r\n")
		}
	}
	blanks := []string{"", " ", "\t", "\r", " \r \t"}
	for i, v := range values {
		for range rng.IntN(3) {
			buf.WriteString(blanks[rng.IntN(len(blanks))])
			eol()
		}
		start := buf.Len()
		buf.WriteString(strings.Repeat(" ", rng.IntN(3)))
		buf.WriteString(v)
		buf.WriteString(strings.Repeat("\t", rng.IntN(2)))
		if i < len(values)-1 || rng.IntN(3) != 0 {
			eol()
		}
		w.lineLens = append(w.lineLens, buf.Len()-start)
	}
	w.stream = buf.Bytes()
	return w
}
