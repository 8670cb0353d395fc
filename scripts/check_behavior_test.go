// Tests of the repository's scripts that a wrong answer would make
// dangerous to trust. The package has no code of its own.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCheckBehavior proves X-H2's check: check-behavior.sh passes only
// when the ids that tests name and the ids docs/behavior.md describes are
// the same set, reports each difference with the files that name it, and
// takes as ids only what the pattern means (not XR-A1, R-A1x, r-a1, ...),
// in *_test.go files outside node_modules. The fixtures spell ids with
// "~" so that this file names no id but its own: the real check reads it.
func TestCheckBehavior(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("check-behavior.sh")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		files    map[string]string // path under the root: content, "~" for "-"
		wantCode int
		want     string // "~" for "-"
	}{
		{
			name: "in step",
			files: map[string]string{
				"docs/behavior.md":   "- **R~D1** empty mcps.\n- **X~A10** bound approvals; see R~D1.\n",
				"server/a_test.go":   "// R~D1: empty\nt.Run(\"X~A10 digest\", nil)\n",
				"bridge/b_test.go":   "t.Run(\"R~D1 again\", nil)\n",
				"bridge/notatest.go": "// R~C9 is in no test file, so it is no test's id.\n",
			},
			want: "check-behavior: 2 behaviour ids, each named by a test and described in docs/behavior.md\n",
		},
		{
			name: "a test names an id the document lacks",
			files: map[string]string{
				"docs/behavior.md": "- **R~D1** empty mcps.\n",
				"server/a_test.go": "// R~D1, X~A10\n",
				"bridge/b_test.go": "// X~A10 again\n",
			},
			wantCode: 1,
			want: "docs/behavior.md does not describe these ids, which tests name:\n" +
				"  X~A10  bridge/b_test.go, server/a_test.go\n",
		},
		{
			name: "the document describes an id no test names",
			files: map[string]string{
				"docs/behavior.md": "- **R~C2** no cache.\n- **R~D1** empty mcps.\n",
				"server/a_test.go": "// R~D1\n",
			},
			wantCode: 1,
			want: "docs/behavior.md describes these ids, which no test names:\n" +
				"  R~C2\n",
		},
		{
			name: "an id is not the start of a longer one",
			files: map[string]string{
				"docs/behavior.md": "- **X~A1** something else.\n",
				"server/a_test.go": "// X~A10\n",
			},
			wantCode: 1,
			want: "docs/behavior.md does not describe these ids, which tests name:\n" +
				"  X~A10  server/a_test.go\n" +
				"docs/behavior.md describes these ids, which no test names:\n" +
				"  X~A1\n",
		},
		{
			name: "only whole ids in test files count",
			files: map[string]string{
				"docs/behavior.md":              "- **R~S1** and **R~S4**, and **X~AB12**.\n",
				"server/a_test.go":              "// XR-A1 R~A1x R~A1_2 r~a1 R~ABC1 R~A X-1 TestR-A1b\n// R~S1–R~S4 (X~AB12)\n",
				"node_modules/pkg/dep_test.go":  "// R~Z9\n",
				"server/testdata/case_test.txt": "// R~Z8\n",
			},
			want: "check-behavior: 3 behaviour ids, each named by a test and described in docs/behavior.md\n",
		},
		{
			name:     "no document",
			files:    map[string]string{"server/a_test.go": "// R~D1\n"},
			wantCode: 1,
			want:     "check-behavior: docs/behavior.md is missing\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			for path, content := range tt.files {
				full := filepath.Join(root, filepath.FromSlash(path))
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, []byte(strings.ReplaceAll(content, "~", "-")), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, err := exec.CommandContext(t.Context(), "bash", script, root).CombinedOutput()
			if code := exitCode(t, err); code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			if diff := cmp.Diff(strings.ReplaceAll(tt.want, "~", "-"), string(out)); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}
