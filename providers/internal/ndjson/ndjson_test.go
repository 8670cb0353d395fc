package ndjson

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestReader(t *testing.T) {
	t.Parallel()
	big := `{"x":"` + strings.Repeat("y", 200<<10) + `"}`
	in := "{\"a\":1}\n\n{\"b\":2}\r\n" + big + "\n{\"done\":true}"
	want := []string{`{"a":1}`, `{"b":2}`, big, `{"done":true}`}
	for _, wrap := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader} {
		r := NewReader(wrap(strings.NewReader(in)))
		var got []string
		for {
			line, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(line))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
	}
}

// A line a failed read cut off is the failure, not a line: a reset or an
// idle timeout mid-line must not read as invalid JSON.
func TestCutOffLine(t *testing.T) {
	t.Parallel()
	cut := errors.New("connection reset")
	r := NewReader(io.MultiReader(strings.NewReader("{\"a\":1}\n{\"b\":"), iotest.ErrReader(cut)))
	if line, err := r.Next(); err != nil || string(line) != `{"a":1}` {
		t.Fatalf("Next = %q, %v; want the first line", line, err)
	}
	if line, err := r.Next(); !errors.Is(err, cut) {
		t.Errorf("Next = %q, %v; want the read error", line, err)
	}
}

func TestLineTooLarge(t *testing.T) {
	t.Parallel()
	r := NewReader(strings.NewReader(strings.Repeat("x", MaxLineSize+1) + "\n"))
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLarge) {
		t.Errorf("Next = %v; want ErrLineTooLarge", err)
	}
}

// TestPooledBuffer: a closed Reader's buffer serves the next
// one, and the lines it returned keep their bytes; a closed Reader reads
// nothing more.
func TestPooledBuffer(t *testing.T) {
	t.Parallel()
	r1 := NewReader(strings.NewReader("{\"a\":1}\n{\"b\":2}\n"))
	line, err := r1.Next()
	if err != nil {
		t.Fatal(err)
	}
	r1.Close()
	r1.Close() // idempotent
	if _, err := r1.Next(); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v, want ErrClosed", err)
	}
	for range 10 { // whichever reader gets the pooled buffer overwrites it
		r2 := NewReader(strings.NewReader("{\"X\":9}\n"))
		if _, err := r2.Next(); err != nil {
			t.Fatal(err)
		}
		r2.Close()
	}
	if diff := cmp.Diff(`{"a":1}`, string(line)); diff != "" {
		t.Errorf("the line read before Close changed (-want +got):\n%s", diff)
	}
}
