package docstest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Blocks finds fenced blocks by backticks or tildes, indented in lists
// too, closed only by their own fence; Runnable and Fake read the info
// string.
func TestBlocks(t *testing.T) {
	t.Parallel()
	doc := "# T\n\n```sh run\nbin/agentd version\n```\n\n- item:\n\n  ````sh run fake=openai\n  a\n  ```\n  b\n  ````\n\n~~~text\nout\n~~~\n"
	got, err := Blocks([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{Line: 3, Info: "sh run", Text: "bin/agentd version\n"},
		{Line: 9, Info: "sh run fake=openai", Text: "  a\n  ```\n  b\n"},
		{Line: 15, Info: "text", Text: "out\n"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		info     string
		runnable bool
		fake     string
		bad      bool
	}{
		{"sh run", true, "", false},
		{"sh run fake=anthropic", true, "anthropic", false},
		{"sh run fake=nobody", true, "", true},
		{"sh run twice", true, "", true},
		{"sh", false, "", false},
		{"text", false, "", false},
	} {
		b := Block{Info: tc.info}
		fake, err := b.Fake()
		if b.Runnable() != tc.runnable || fake != tc.fake || (err != nil) != tc.bad {
			t.Errorf("%q: runnable %v, fake %q, err %v", tc.info, b.Runnable(), fake, err)
		}
	}
	if _, err := Blocks([]byte("```sh\nopen\n")); err == nil {
		t.Error("an unclosed block: no error")
	}
}
