// Package docstest keeps the documents honest: it finds the commands that
// README.md and docs/*.md show as runnable and runs them, as a reader
// would, against an agentd it starts (docs_test.go).
//
// A fenced code block is runnable when its info string is "sh run":
//
//	```sh run
//	bin/agentd generate --request examples/demo-start.json
//	```
//
// It runs with bash -euo pipefail in a copy of the repository's top level
// (each entry a link to the repository's own, bin/agentd the binary under
// test), with AGENTD_ADDR naming the started agentd, and "y" answering
// every question it asks on its standard input. It must exit 0 within
// its time and leave no process behind. "sh run fake=openai" (or
// anthropic, ollama) marks a block written for a real provider: the
// provider is served by internal/fakemodel, which speaks its wire
// format, so the command stays as a reader types it. Any other fenced
// block is illustration.
//
// The browser example (examples/web) runs here too, in headless Chromium
// against an agentd of its own (browser_test.go).
package docstest

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// Fakes are the providers a block may name with fake=.
var Fakes = []string{"openai", "anthropic", "ollama"}

// Block is a fenced code block of a document.
type Block struct {
	// Line is the line of its opening fence, from 1.
	Line int
	// Info is its info string, as written.
	Info string
	// Text is its content.
	Text string
}

// Runnable reports whether b is to be run: its info string is "sh run",
// with an optional fake=<provider>.
func (b Block) Runnable() bool {
	f := strings.Fields(b.Info)
	return len(f) >= 2 && f[0] == "sh" && f[1] == "run"
}

// Fake is the provider b was written for, "" if none; an error when it
// names one the fake model does not speak, or another word follows run.
func (b Block) Fake() (string, error) {
	f := strings.Fields(b.Info)
	if len(f) <= 2 {
		return "", nil
	}
	name, ok := strings.CutPrefix(f[2], "fake=")
	if !ok || len(f) > 3 || !slices.Contains(Fakes, name) {
		return "", fmt.Errorf("line %d: %q: after \"sh run\" only fake=<%s> may follow", b.Line, b.Info, strings.Join(Fakes, "|"))
	}
	return name, nil
}

// Blocks are the fenced code blocks of a Markdown document, in order. A
// fence is three or more backticks or tildes at the start of a line
// (indented by up to three spaces, or deeper inside a list); it closes
// with the same character, at least as many.
func Blocks(doc []byte) ([]Block, error) {
	var out []Block
	var open *Block
	var fence string
	var body strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(doc))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if open == nil {
			if f := fenceOf(trimmed); f != "" {
				open, fence = &Block{Line: n, Info: strings.TrimSpace(trimmed[len(f):])}, f
				body.Reset()
			}
			continue
		}
		if f := fenceOf(trimmed); f != "" && f[0] == fence[0] && len(f) >= len(fence) && strings.TrimSpace(trimmed[len(f):]) == "" {
			open.Text = body.String()
			out = append(out, *open)
			open = nil
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	if open != nil {
		return out, fmt.Errorf("line %d: a fenced block is never closed", open.Line)
	}
	return out, sc.Err()
}

// fenceOf is the fence that line opens with ("" if none).
func fenceOf(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return line[:n]
		}
	}
	return ""
}
