package docstest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// link is a Markdown link's target: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestLinks holds the documents' links to the tree: every relative link
// of README.md and docs/*.md names a file or directory that exists, and
// a #fragment names a heading of its document.
func TestLinks(t *testing.T) {
	for _, path := range documents(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(outsideCode(string(data)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), file)
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: the link %s names %s, which does not exist", path, target, dest)
				continue
			}
			if frag != "" && !hasAnchor(t, dest, frag) {
				t.Errorf("%s: the link %s names no heading of %s", path, target, dest)
			}
		}
	}
}

// outsideCode is doc without its fenced blocks and code spans, where a
// link is no link.
func outsideCode(doc string) string {
	var b strings.Builder
	for _, line := range proseLines(doc) {
		b.WriteString(codeSpan.ReplaceAllString(line, ""))
	}
	return b.String()
}

var codeSpan = regexp.MustCompile("`[^`]*`")

// proseLines are doc's lines outside its fenced blocks (fences included
// in neither).
func proseLines(doc string) []string {
	blocks, _ := Blocks([]byte(doc))
	inBlock := map[int]bool{}
	for _, bl := range blocks {
		for i := range strings.Count(bl.Text, "\n") + 2 {
			inBlock[bl.Line+i] = true
		}
	}
	var out []string
	n := 0
	for line := range strings.Lines(doc) {
		n++
		if !inBlock[n] {
			out = append(out, line)
		}
	}
	return out
}

// hasAnchor reports whether a heading of the Markdown file path has the
// anchor GitHub gives it: its text (code spans' backticks dropped) in
// lower case, spaces to hyphens, other punctuation but hyphens and
// underscores dropped.
func hasAnchor(t *testing.T, path, anchor string) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil || !strings.HasSuffix(path, ".md") {
		return false
	}
	for _, line := range proseLines(string(data)) {
		h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if ok && strings.HasPrefix(line, "#") && slug(strings.TrimSpace(strings.ReplaceAll(h, "`", ""))) == anchor {
			return true
		}
	}
	return false
}

func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
