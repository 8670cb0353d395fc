package docstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// layoutRow is a row of the README's layout table: "| `path/` | ... |".
var layoutRow = regexp.MustCompile("^\\| `([a-z_]+)/` \\| (.*) \\|$")

// TestLayoutTable holds the README's layout table to the tree: a row for
// every top-level directory the repository tracks, none for another, and
// the rows of cmd/, providers/ and internal/ naming each of their
// directories, and only those.
func TestLayoutTable(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for line := range strings.Lines(string(data)) {
		if m := layoutRow.FindStringSubmatch(strings.TrimRight(line, "\n")); m != nil {
			rows[m[1]] = m[2]
		}
	}
	tracked := trackedDirs(t)
	for _, d := range tracked {
		if _, ok := rows[d]; !ok {
			t.Errorf("the README's layout table has no row for %s/", d)
		}
	}
	for d := range rows {
		if !slices.Contains(tracked, d) {
			t.Errorf("the README's layout table has a row for %s/, which the repository does not hold", d)
		}
	}
	for _, d := range []string{"cmd", "providers", "internal"} {
		named := regexp.MustCompile("`([a-z0-9-]+)`").FindAllStringSubmatch(rows[d], -1)
		var got []string
		for _, m := range named {
			got = append(got, m[1])
		}
		for _, sub := range subdirs(t, d) {
			if !slices.Contains(got, sub) {
				t.Errorf("the README's row for %s/ does not name %s", d, sub)
			}
		}
	}
}

// trackedTop are the repository's tracked top-level entries, files and
// directories.
func trackedTop(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, f := range lsFiles(t) {
		top, _, _ := strings.Cut(f, "/")
		if !slices.Contains(out, top) {
			out = append(out, top)
		}
	}
	return out
}

// lsFiles are the files git tracks, relative to the top level.
func lsFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	return strings.Fields(string(out))
}

// trackedDirs are the top-level directories holding tracked files, but
// the hidden ones.
func trackedDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, f := range lsFiles(t) {
		d, _, nested := strings.Cut(f, "/")
		if nested && !strings.HasPrefix(d, ".") && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// subdirs are the directories directly under dir that hold Go packages
// or more directories.
func subdirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "testdata" {
			out = append(out, e.Name())
		}
	}
	return out
}
