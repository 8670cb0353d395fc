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
