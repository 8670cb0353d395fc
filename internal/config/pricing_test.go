package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// writeConfig writes text as a configuration file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agentd.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// pricing.file and pricing.models change the shipped table, the models'
// entries over the file's.
func TestLoadPricing(t *testing.T) {
	t.Parallel()
	prices := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(prices, []byte(`version: 1
date: 2026-01-01
models:
  openai:
    gpt-5: {currency: USD, date: 2026-01-01, input: 2, output: 20}
    o3:    {currency: USD, date: 2026-01-01, input: 9, output: 9}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, "pricing:\n  file: "+prices+`
  models:
    openai:
      o3: {currency: EUR, date: 2026-02-01, input: 1, output: 1}
`)
	cfg, err := Load(path, func(string) string { return "" }, "/bin/agentd")
	if err != nil {
		t.Fatal(err)
	}
	table, err := cfg.Pricing.Table()
	if err != nil {
		t.Fatal(err)
	}
	million := &agentdv1.Usage{InputTokens: 1_000_000}
	for model, want := range map[string]*agentdv1.Cost{
		"gpt-5":      {Currency: "USD", Nanos: 2e9, PricedOn: "2026-01-01"},
		"o3":         {Currency: "EUR", Nanos: 1e9, PricedOn: "2026-02-01"},
		"gpt-5-mini": {Currency: "USD", Nanos: 0.25e9, PricedOn: "2025-12-01"},
	} {
		if diff := cmp.Diff(want, table.Cost("openai", model, million), protocmp.Transform()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", model, diff)
		}
	}
}

// A problem of pricing.models stops the load at its line of the
// configuration; one of pricing.file stops the table's build at its own.
func TestLoadRejectsPricing(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `listen: 127.0.0.1:7070
pricing:
  models:
    openai:
      gpt-5: {currency: USD, date: 2026-01-01, input: 2, output: 20, cached: 1}
`)
	_, err := Load(path, func(string) string { return "" }, "/bin/agentd")
	want := path + ":5: pricing.models.openai.gpt-5.cached: unknown key"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Load: %v, want %s...", err, want)
	}
	prices := writeConfig(t, "version: 1\ndate: 2026-01-01\nmodels:\n  openai:\n    gpt-5: {currency: USD, input: 2, output: 20}\n")
	cfg, err := Load(writeConfig(t, "pricing:\n  file: "+prices+"\n"), func(string) string { return "" }, "/bin/agentd")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Pricing.Table(); err == nil || err.Error() != prices+":5: models.openai.gpt-5: needs date" {
		t.Errorf("Table: %v", err)
	}
}
