package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/version"
)

// X-O6: `agentd version` and `agentd --version` print the build's
// version, commit and Go release.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"version", "--version"} {
		t.Run(arg, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if err := run(t.Context(), []string{arg}, strings.NewReader(""), &out, &bytes.Buffer{}); err != nil {
				t.Fatal(err)
			}
			v := version.Get()
			if got, want := strings.TrimSpace(out.String()), v.String(); got != want {
				t.Errorf("%s printed %q, want %q", arg, got, want)
			}
			for _, part := range []string{v.Version, v.Commit, v.GoVersion} {
				if !strings.Contains(out.String(), part) {
					t.Errorf("%s printed %q, lacking %q", arg, out.String(), part)
				}
			}
		})
	}
}
