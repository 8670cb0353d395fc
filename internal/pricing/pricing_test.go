package pricing_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/pricing"
	"github.com/agentd/agentd/providers/registry"
)

// testPrices are entries of providers the shipped table does not price,
// over it.
const testPrices = `version: 1
date: 2025-12-01
models:
  test:
    priced: {currency: USD, date: 2025-11-02, input: 3, output: 15, cache_read: 0.30, cache_write: 3.75}
    fine:   {currency: EUR, date: 2025-11-03, input: "0.075", output: 0.01875}
    half:   {currency: USD, date: 2025-11-04, input: 0.0005, output: 0.0005}
    dear:   {currency: USD, date: 2025-11-05, input: 1000000, output: 1000000}
    under:  {currency: USD, date: 2025-11-08, input: 0.000499999, output: 1}
  star:
    "*":     {currency: USD, date: 2025-11-06, input: 1, output: 2}
    special: {currency: USD, date: 2025-11-07, input: 10, output: 20}
`

// writeFile writes text to name in a new directory and returns its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func load(t *testing.T, text string) *pricing.Table {
	t.Helper()
	table, err := pricing.Load(writeFile(t, "prices.yaml", text), pricing.Inline{})
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func usd(nanos int64, on string) *agentdv1.Cost {
	return &agentdv1.Cost{Currency: "USD", Nanos: nanos, PricedOn: on}
}

func TestCost(t *testing.T) {
	t.Parallel()
	table := load(t, testPrices)
	tests := []struct {
		name            string
		provider, model string
		usage           *agentdv1.Usage
		want            *agentdv1.Cost
	}{
		{"every kind", "test", "priced",
			&agentdv1.Usage{InputTokens: 1000, OutputTokens: 500, CacheReadInputTokens: 2000, CacheWriteInputTokens: 100},
			usd(3_000_000+7_500_000+600_000+375_000, "2025-11-02")},
		{"a fraction of a billionth rounds half up", "test", "fine",
			&agentdv1.Usage{OutputTokens: 1}, // 18.75 billionths
			&agentdv1.Cost{Currency: "EUR", Nanos: 19, PricedOn: "2025-11-03"}},
		{"an exact price", "test", "fine",
			&agentdv1.Usage{InputTokens: 1},
			&agentdv1.Cost{Currency: "EUR", Nanos: 75, PricedOn: "2025-11-03"}},
		{"half a billionth rounds up", "test", "half",
			&agentdv1.Usage{InputTokens: 1}, usd(1, "2025-11-04")},
		{"rounded once a turn, not once a kind", "test", "half",
			&agentdv1.Usage{InputTokens: 1, OutputTokens: 1}, usd(1, "2025-11-04")},
		{"below half a billionth rounds down", "test", "under",
			&agentdv1.Usage{InputTokens: 1}, usd(0, "2025-11-08")},
		{"a kind without a price is unknown, the rest priced", "test", "fine",
			&agentdv1.Usage{InputTokens: 1000, CacheWriteInputTokens: 10},
			&agentdv1.Cost{Currency: "EUR", Nanos: 75_000, Unknown: true, PricedOn: "2025-11-03"}},
		{"a kind without a price that the usage does not use", "test", "fine",
			&agentdv1.Usage{InputTokens: 1000, CacheReadInputTokens: 0},
			&agentdv1.Cost{Currency: "EUR", Nanos: 75_000, PricedOn: "2025-11-03"}},
		{"an unknown model", "test", "other", &agentdv1.Usage{InputTokens: 1}, &agentdv1.Cost{Unknown: true}},
		{"an unknown provider", "nobody", "priced", &agentdv1.Usage{InputTokens: 1}, &agentdv1.Cost{Unknown: true}},
		{"a local model costs nothing, known", "ollama", "llama3.2",
			&agentdv1.Usage{InputTokens: 5000, OutputTokens: 700}, usd(0, "2025-12-01")},
		{"no usage", "test", "priced", nil, usd(0, "2025-11-02")},
		{"too dear for an int64", "test", "dear",
			&agentdv1.Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64}, usd(math.MaxInt64, "2025-11-05")},
		{"negative tokens count none", "test", "priced", &agentdv1.Usage{InputTokens: -5}, usd(0, "2025-11-02")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := table.Cost(tt.provider, tt.model, tt.usage)
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Cost(%q, %q) (-want +got):\n%s", tt.provider, tt.model, diff)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	table := load(t, testPrices)
	tests := []struct {
		provider, model string
		pricedOn        string // "": unknown
	}{
		{"test", "priced", "2025-11-02"},
		{"test", "priced-20250929", "2025-11-02"},
		{"test", "priced-2025-09-29", "2025-11-02"},
		{"test", "priced-2025", ""},
		{"test", "priced-2025-0929", ""},
		{"test", "priced-2025092", ""},
		{"test", "-20250929", ""},
		{"test", "Priced", ""},
		{"star", "anything", "2025-11-06"},
		{"star", "special", "2025-11-07"},
		{"star", "special-20250101", "2025-11-07"},
		{"anthropic", "claude-sonnet-4-5-20250929", "2025-12-01"},
		{"openai", "gpt-4o-2024-08-06", "2025-12-01"},
	}
	for _, tt := range tests {
		got := table.Cost(tt.provider, tt.model, &agentdv1.Usage{InputTokens: 1})
		if got.GetPricedOn() != tt.pricedOn || got.GetUnknown() != (tt.pricedOn == "") {
			t.Errorf("Cost(%q, %q) = %v, want priced on %q", tt.provider, tt.model, got, tt.pricedOn)
		}
	}
	// A dated model with an entry of its own is priced by it, not by the
	// entry of the name without the date.
	got := table.Cost("openai", "gpt-4o-2024-05-13", &agentdv1.Usage{InputTokens: 1_000_000})
	if want := usd(5_000_000_000, "2025-12-01"); !cmp.Equal(want, got, protocmp.Transform()) {
		t.Errorf("gpt-4o-2024-05-13: got %v, want %v", got, want)
	}
}

// The shipped table loads, prices the models the adapters' tests use and
// their siblings, and names only providers agentd has.
func TestShipped(t *testing.T) {
	t.Parallel()
	table, err := pricing.Load("", pricing.Inline{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ provider, model string }{
		{"anthropic", "claude-sonnet-4-5"}, {"anthropic", "claude-sonnet-4-5-20250929"},
		{"anthropic", "claude-opus-4-1"}, {"anthropic", "claude-haiku-4-5"},
		{"openai", "gpt-5-mini"}, {"openai", "gpt-5"}, {"openai", "gpt-4o"}, {"openai", "gpt-4o-mini"},
		{"openai", "gpt-4.1"}, {"openai-responses", "gpt-5-mini"},
		{"gemini", "gemini-2.5-flash"}, {"gemini", "gemini-2.5-pro"}, {"deepseek", "deepseek-chat"},
	} {
		got := table.Cost(m.provider, m.model, &agentdv1.Usage{InputTokens: 1000, OutputTokens: 1000, CacheReadInputTokens: 1000})
		if got.GetUnknown() || got.GetNanos() <= 0 || got.GetCurrency() != "USD" || got.GetPricedOn() == "" {
			t.Errorf("%s %s: %v, want a known cost in USD", m.provider, m.model, got)
		}
	}
	known := []string{"mock", "script"}
	for _, a := range registry.Declared {
		known = append(known, a.Name)
	}
	for _, p := range table.Providers() {
		if !slices.Contains(known, p) {
			t.Errorf("the shipped table prices models of %q, which is no provider of agentd's (%v)", p, known)
		}
	}
}

func TestOverride(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "prices.yaml", `version: 1
date: 2026-01-01
models:
  openai:
    gpt-5: {currency: USD, date: 2026-01-01, input: 2, output: 20}
    gpt-6: {currency: USD, date: 2026-01-02, input: 4, output: 40}
    o3:    {currency: USD, date: 2026-01-03, input: 9, output: 9}
`)
	var inline yamlNode
	inline.parse(t, `openai:
  o3:    {currency: EUR, date: 2026-02-01, input: 1, output: 1}
azure:
  my-deployment: {currency: USD, date: 2026-02-02, input: 2.5, output: 10}
`)
	table, err := pricing.Load(file, pricing.Inline{Models: inline.n, File: "agentd.yaml", Key: "pricing.models"})
	if err != nil {
		t.Fatal(err)
	}
	million := &agentdv1.Usage{InputTokens: 1_000_000}
	for _, tt := range []struct {
		why, provider, model string
		want                 *agentdv1.Cost
	}{
		{"the file's, over the shipped", "openai", "gpt-5", usd(2e9, "2026-01-01")},
		{"the file's, added", "openai", "gpt-6", usd(4e9, "2026-01-02")},
		{"inline, over the file's", "openai", "o3", &agentdv1.Cost{Currency: "EUR", Nanos: 1e9, PricedOn: "2026-02-01"}},
		{"inline, added", "azure", "my-deployment", usd(2.5e9, "2026-02-02")},
		{"the shipped, left", "openai", "gpt-5-mini", usd(0.25e9, "2025-12-01")},
	} {
		if diff := cmp.Diff(tt.want, table.Cost(tt.provider, tt.model, million), protocmp.Transform()); diff != "" {
			t.Errorf("%s %s, %s (-want +got):\n%s", tt.provider, tt.model, tt.why, diff)
		}
	}
}

func BenchmarkCost(b *testing.B) {
	table, err := pricing.Load("", pricing.Inline{})
	if err != nil {
		b.Fatal(err)
	}
	u := &agentdv1.Usage{InputTokens: 12_000, OutputTokens: 800, CacheReadInputTokens: 40_000, CacheWriteInputTokens: 2_000}
	for _, m := range []struct{ name, provider, model string }{
		{"exact", "anthropic", "claude-sonnet-4-5"},
		{"dated", "anthropic", "claude-sonnet-4-5-20250929"},
		{"star", "ollama", "llama3.2"},
		{"unknown", "azure", "my-deployment"},
	} {
		b.Run(m.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				table.Cost(m.provider, m.model, u)
			}
		})
	}
}
