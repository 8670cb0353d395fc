package pricing_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/agentd/agentd/internal/pricing"
)

// yamlNode is a YAML document's top node, as a configuration's decoder
// hands pricing.models over.
type yamlNode struct{ n *yaml.Node }

func (y *yamlNode) parse(t *testing.T, text string) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	y.n = doc.Content[0]
}

// entry is a price file holding the one entry e, of openai's gpt-5, on
// line 5.
func entry(e string) string {
	return "version: 1\ndate: 2025-12-01\nmodels:\n  openai:\n    gpt-5: " + e + "\n"
}

// Every problem of a price file is refused, each at its line.
func TestLoadRejects(t *testing.T) {
	t.Parallel()
	const ok = "currency: USD, date: 2025-12-01, input: 1, output: 2"
	tests := []struct {
		name, text string
		want       []string // after "FILE:"
	}{
		{"an unknown key of an entry", entry("{" + ok + ", cached: 1}"),
			[]string{"5: models.openai.gpt-5.cached: unknown key; an entry's keys are currency, date, input, output, cache_read, cache_write and reasoning"}},
		{"an unknown key of the file", "version: 1\ndate: 2025-12-01\nprices: {}\n",
			[]string{"3: prices: unknown key; a price file holds version, date and models"}},
		{"a negative price", entry("{" + ok + ", cache_read: -0.5}"),
			[]string{`5: models.openai.gpt-5.cache_read: "-0.5" is not a price: a price is not negative`}},
		{"a bad decimal", entry("{currency: USD, date: 2025-12-01, input: 1e-6, output: .5}"),
			[]string{
				`5: models.openai.gpt-5.input: "1e-6" is not a price: write a decimal of the currency's unit, e.g. 3 or 0.075`,
				`5: models.openai.gpt-5.output: ".5" is not a price: write a decimal of the currency's unit, e.g. 3 or 0.075`,
			}},
		{"a price finer than a billionth", entry("{" + ok + ", reasoning: 0.0000000001}"),
			[]string{`5: models.openai.gpt-5.reasoning: "0.0000000001" is not a price: finer than a billionth of the unit`}},
		{"a price too large", entry("{" + ok + ", cache_write: 1000001}"),
			[]string{`5: models.openai.gpt-5.cache_write: "1000001" is not a price: more than 1000000 of the unit per million tokens`}},
		{"a price that is no single value", entry("{currency: USD, date: 2025-12-01, input: [1], output: 2}"),
			[]string{`5: models.openai.gpt-5.input: "" is not a price: write a decimal of the currency's unit, e.g. 3 or 0.075`}},
		{"a currency in lower case", entry("{currency: usd, date: 2025-12-01, input: 1, output: 2}"),
			[]string{`5: models.openai.gpt-5.currency: "usd" is not an ISO 4217 currency code; write its three capital letters, e.g. USD or EUR`}},
		{"a currency that is no code", entry("{currency: DOLLAR, date: 2025-12-01, input: 1, output: 2}"),
			[]string{`5: models.openai.gpt-5.currency: "DOLLAR" is not an ISO 4217 currency code; write its three capital letters, e.g. USD or EUR`}},
		{"a missing date", entry("{currency: USD, input: 1, output: 2}"),
			[]string{"5: models.openai.gpt-5: needs date"}},
		{"a missing currency and prices", entry("{date: 2025-12-01}"),
			[]string{"5: models.openai.gpt-5: needs currency, input, output"}},
		{"a date that is no day", entry("{currency: USD, date: 2025-13-01, input: 1, output: 2}"),
			[]string{`5: models.openai.gpt-5.date: "2025-13-01" is not a day; write YYYY-MM-DD, e.g. 2025-12-01`}},
		{"an entry that is no map", entry("3"),
			[]string{`5: models.openai.gpt-5: is not a map; write one "key: value" each`}},
		{"an entry written twice", "version: 1\ndate: 2025-12-01\nmodels:\n  openai:\n    gpt-5: {" + ok + "}\n    gpt-5: {" + ok + "}\n",
			[]string{"6: models.openai.gpt-5: written twice"}},
		{"a missing version and date", "models: {}\n",
			[]string{"1: the file: needs version, date"}},
		{"another version", "version: 2\ndate: 2025-12-01\n",
			[]string{"1: version: this agentd reads version 1 of the format"}},
		{"a missing file date", "version: 1\ndate:\n",
			[]string{`2: date: "" is not a day; write YYYY-MM-DD, e.g. 2025-12-01`}},
		{"a syntax error", "version: 1\nmodels:\n  openai: {}\n anthropic: {}\n",
			[]string{"3: did not find expected key"}}, // the line yaml.v3 gives
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, "prices.yaml", tt.text)
			_, err := pricing.Load(path, pricing.Inline{})
			if err == nil {
				t.Fatal("loaded")
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, path+":"+w)
			}
			if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := pricing.Load("/nonexistent/prices.yaml", pricing.Inline{})
	if err == nil || !strings.HasPrefix(err.Error(), "price file: open /nonexistent/prices.yaml: ") {
		t.Errorf("got %v, want the file's error", err)
	}
}

// Inline entries are checked where they stand in their document: a
// configuration's lines and keys.
func TestInlineCheck(t *testing.T) {
	t.Parallel()
	var y yamlNode
	y.parse(t, `
openai:
  gpt-5: {currency: USD, date: 2025-12-01, input: 1, output: -2}
anthropic: null
gemini:
  gemini-2.5-flash:
    currency: USD
    input: 1
    output: 2
`)
	in := pricing.Inline{Models: y.n, File: "agentd.yaml", Key: "pricing.models"}
	want := []string{
		`agentd.yaml:3: pricing.models.openai.gpt-5.output: "-2" is not a price: a price is not negative`,
		"agentd.yaml:7: pricing.models.gemini.gemini-2.5-flash: needs date",
	}
	err := in.Check()
	if err == nil {
		t.Fatal("checked")
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("Check (-want +got):\n%s", diff)
	}
	in.File = ""
	if got := in.Check().Error(); !strings.HasPrefix(got, "line 3: pricing.models.openai.gpt-5.output: ") {
		t.Errorf("without a file: %s", got)
	}
	if err := (pricing.Inline{}).Check(); err != nil {
		t.Errorf("no entries: %v", err)
	}
}
