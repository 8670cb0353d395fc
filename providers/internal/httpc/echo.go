package httpc

import (
	"encoding/json"
	"strings"

	"github.com/agentd/agentd/providers"
)

// A provider, or a gateway in front of it, may answer an error by quoting
// the request back: its messages, tools and instructions, which are the
// conversation. An error's text reaches logs, spans and the client's
// status, and must say what went wrong, never what was said: the part of
// it that quotes the request is cut out, with echoCut in its place.

// echoCut marks where the request quoted back was cut out of an error.
const echoCut = "[the request, quoted back by the provider, cut]"

// minEcho is the shortest piece of a request that an error is searched
// for: shorter ones ("hi", "ok") are common words, and say little.
const minEcho = 8

// RequestTexts lists what of req is the conversation: the instructions,
// the messages' texts, reasoning, tool calls' arguments and results, and
// the tools' descriptions, each at least minEcho bytes.
func RequestTexts(req *providers.Request) []string {
	var out []string
	add := func(s string) {
		if len(s) >= minEcho {
			out = append(out, s)
		}
	}
	add(req.Instructions)
	for _, m := range req.Messages {
		for _, p := range m.GetParts() {
			add(p.GetText())
			add(p.GetReasoning().GetText())
			add(p.GetToolCall().GetArguments())
			add(p.GetToolResult().GetOutput())
		}
	}
	for _, t := range req.Tools {
		add(t.GetDescription())
	}
	return out
}

// cutEchoes cuts out of s the part that quotes any of texts (as they are,
// or as JSON writes them inside a string): from the outermost bracket or
// quote still open before the first quote of them, to the end.
func cutEchoes(s string, texts []string) string {
	first := -1
	for _, t := range texts {
		for _, form := range []string{t, jsonInner(t)} {
			if i := strings.Index(s, form); i >= 0 && (first < 0 || i < first) {
				first = i
			}
		}
	}
	if first < 0 {
		return s
	}
	return strings.TrimRight(s[:openingBefore(s, first)], " :") + " " + echoCut
}

// jsonInner is t as JSON writes it inside a string, without the quotes.
func jsonInner(t string) string {
	b, _ := json.Marshal(t)
	return string(b[1 : len(b)-1])
}

// openingBefore is where the outermost bracket ({ or [) or quote that is
// still open at i begins, or i when none is.
func openingBefore(s string, i int) int {
	start, depth := i, 0
	for j := i - 1; j >= 0; j-- {
		switch s[j] {
		case '}', ']':
			depth++
		case '{', '[':
			if depth == 0 {
				start = j
			} else {
				depth--
			}
		}
	}
	if start == i {
		if q := strings.LastIndexAny(s[:i], `"'`); q >= 0 && strings.Count(s[:i], s[q:q+1])%2 == 1 {
			start = q
		}
	}
	return start
}
