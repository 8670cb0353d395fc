package contextfit

import (
	"strings"
)

// Window is a model's published context window.
type Window struct {
	// Tokens is the window, shared by the request and the answer.
	Tokens int64
	// MaxInput is the most a request may hold where the provider caps it
	// below the window less the answer (GPT-5: 272,000 of 400,000); 0:
	// no such cap.
	MaxInput int64
}

// Budget is what the window leaves a request when reserve tokens are kept
// for the answer (0: DefaultReserveOutputTokens).
func (w Window) Budget(reserve int64) int64 {
	if reserve == 0 {
		reserve = DefaultReserveOutputTokens
	}
	b := w.Tokens - reserve
	if w.MaxInput > 0 {
		b = min(b, w.MaxInput)
	}
	return b
}

// TableDate is when the windows of the table were taken from the
// providers' published model pages; docs/context.md shows the table.
const TableDate = "2026-12-05"

// windows is the table of known windows. A row names a provider adapter
// and a model, or a family of models: it matches the model of that name
// and every "<name>-…" (dated snapshots, sizes), and of the rows that
// match, the longest name wins. Gemini publishes an input limit, its
// answer's being separate: that limit is its row's window.
var windows = []struct {
	provider, model string
	window          Window
}{
	{"anthropic", "claude", Window{Tokens: 200_000}},
	{"anthropic", "claude-sonnet-4-6", Window{Tokens: 1_000_000}},
	{"anthropic", "claude-opus-4-6", Window{Tokens: 1_000_000}},
	{"anthropic", "claude-opus-4-7", Window{Tokens: 1_000_000}},
	{"openai", "gpt-4o", Window{Tokens: 128_000}},
	{"openai", "gpt-4.1", Window{Tokens: 1_047_576}},
	{"openai", "gpt-5", Window{Tokens: 400_000, MaxInput: 272_000}},
	{"openai", "gpt-5-chat", Window{Tokens: 128_000}},
	{"openai", "o1", Window{Tokens: 200_000}},
	{"openai", "o1-mini", Window{Tokens: 128_000}},
	{"openai", "o3", Window{Tokens: 200_000}},
	{"openai", "o4-mini", Window{Tokens: 200_000}},
	{"gemini", "gemini", Window{Tokens: 1_048_576}},
	{"deepseek", "deepseek-v4", Window{Tokens: 1_000_000}},
}

// sameModels names the adapters that serve another's models by the same
// names.
var sameModels = map[string]string{"openai-responses": "openai"}

// router is the provider that picks the adapter from the model's name.
const router = "router"

// Lookup finds the window of model as provider serves it. Through the
// router, a model "<provider>/<model>" is that provider's, and a model
// without a prefix is matched against every row, as the router's own
// names (claude-, gpt-, o1…, gemini-, deepseek-) go each to the provider
// of the rows that match it.
func Lookup(provider, model string) (Window, bool) {
	if provider == router {
		if p, m, ok := strings.Cut(model, "/"); ok {
			return Lookup(p, m)
		}
		provider = ""
	}
	if p, ok := sameModels[provider]; ok {
		provider = p
	}
	return longest(provider, model)
}

// longest is the window of the longest name that names model among
// provider's rows, or among every row for provider "".
func longest(provider, model string) (Window, bool) {
	var w Window
	n := 0
	for _, row := range windows {
		if (provider == "" || row.provider == provider) && names(row.model, model) && len(row.model) > n {
			w, n = row.window, len(row.model)
		}
	}
	return w, n > 0
}

// names reports whether a row's name is model's, or its family's.
func names(name, model string) bool {
	rest, ok := strings.CutPrefix(model, name)
	return ok && (rest == "" || rest[0] == '-')
}
