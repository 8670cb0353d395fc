package mcpconn

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// keptLines joins the lines next hands out until the stream ends; the
// error is nil on a clean end (io.EOF).
func keptLines(j *jsonLines) (string, error) {
	var b strings.Builder
	for {
		line, err := j.next()
		b.Write(line)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return b.String(), err
		}
	}
}

func TestJSONLines(t *testing.T) {
	t.Parallel()
	longJSON := `{"jsonrpc":"2.0","method":"x","params":{"pad":"` + strings.Repeat("a", 200<<10) + `"}}`
	longBanner := strings.Repeat("=", 100<<10)
	tests := []struct {
		name    string
		in      string
		want    string
		dropped []string
	}{
		{
			name: "JSON lines pass intact",
			in:   `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `[{"jsonrpc":"2.0","method":"m"}]` + "\n",
			want: `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `[{"jsonrpc":"2.0","method":"m"}]` + "\n",
		},
		{
			name:    "banner and log lines are dropped and reported",
			in:      "Fake server v1.0\n" + `{"a":1}` + "\nINFO ready\n" + `{"b":2}` + "\n",
			want:    `{"a":1}` + "\n" + `{"b":2}` + "\n",
			dropped: []string{"Fake server v1.0", "INFO ready"},
		},
		{
			name:    "log lines in brackets are dropped",
			in:      "[INFO] listening\n[2026-01-02 03:04:05] up\n" + `[ {"a":1} ]` + "\n[]\n",
			want:    `[ {"a":1} ]` + "\n[]\n",
			dropped: []string{"[INFO] listening", "[2026-01-02 03:04:05] up"},
		},
		{
			name: "leading blanks and blank lines are kept",
			in:   "\n  \t{\"a\":1}\n\n",
			want: "\n  \t{\"a\":1}\n\n",
		},
		{
			name:    "CRLF line ends",
			in:      "{\"a\":1}\r\nbanner\r\n{\"b\":2}\r\n",
			want:    "{\"a\":1}\r\n{\"b\":2}\r\n",
			dropped: []string{"banner"},
		},
		{
			name: "a line longer than 64 KiB passes intact",
			in:   longJSON + "\n" + `{"b":2}` + "\n",
			want: longJSON + "\n" + `{"b":2}` + "\n",
		},
		{
			// Its later chunks start with "{" but belong to the dropped line.
			name:    "a dropped line longer than the buffer is dropped whole",
			in:      longBanner + `{"looks":"like json"}` + "\nafter\n" + `{"b":2}` + "\n",
			want:    `{"b":2}` + "\n",
			dropped: []string{strings.Repeat("=", 64<<10), "after"},
		},
		{
			name: "a last line without a newline passes",
			in:   `{"a":1}` + "\n" + `{"b":2}`,
			want: `{"a":1}` + "\n" + `{"b":2}`,
		},
		{
			name:    "a last line without a newline is dropped",
			in:      `{"a":1}` + "\ngoodbye",
			want:    `{"a":1}` + "\n",
			dropped: []string{"goodbye"},
		},
		{
			name:    "nothing but noise",
			in:      "a\nb\n",
			want:    "",
			dropped: []string{"a", "b"},
		},
	}
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"large reads", func(r io.Reader) io.Reader { return r }},
		{"one byte reads", iotest.OneByteReader},
	}
	for _, tc := range tests {
		for _, rd := range readers {
			t.Run(tc.name+"/"+rd.name, func(t *testing.T) {
				t.Parallel()
				var dropped []string
				j := newJSONLines(rd.wrap(strings.NewReader(tc.in)), 0, func(line []byte) {
					dropped = append(dropped, string(line))
				})
				got, err := keptLines(j)
				if err != nil {
					t.Fatalf("keptLines: %v", err)
				}
				if got != tc.want {
					t.Errorf("output differs (-want +got):\n%s", cmp.Diff(tc.want, got))
				}
				if diff := cmp.Diff(tc.dropped, dropped); diff != "" {
					t.Errorf("dropped lines differ (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestJSONLinesReadError(t *testing.T) {
	t.Parallel()
	errBroken := errors.New("broken pipe")
	j := newJSONLines(io.MultiReader(strings.NewReader(`{"a":1}`+"\n"), iotest.ErrReader(errBroken)), 0, nil)
	got, err := keptLines(j)
	if got != `{"a":1}`+"\n" || !errors.Is(err, errBroken) {
		t.Fatalf("keptLines = %q, %v; want the line, then %v", got, err, errBroken)
	}
	// The error sticks.
	if line, err := j.next(); line != nil || !errors.Is(err, errBroken) {
		t.Fatalf("next after the error = %q, %v", line, err)
	}
}

// A kept line longer than the limit ends the stream (the SDK would buffer
// all of it); a dropped line of any length does not.
func TestJSONLinesLimit(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200)
	in := "INFO " + long + "\n" + `{"ok":1}` + "\n" + `{"big":"` + long + `"}` + "\n" + `{"after":1}` + "\n"
	j := newJSONLines(strings.NewReader(in), 100, nil)
	got, err := keptLines(j)
	if !errors.Is(err, errMessageTooLarge) || !j.overflowed() {
		t.Fatalf("err = %v, overflowed = %v; want errMessageTooLarge", err, j.overflowed())
	}
	if !strings.HasPrefix(got, `{"ok":1}`+"\n") || strings.Contains(got, "after") {
		t.Errorf("read %q; want the short message, then the stream ends", got)
	}
}
