package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// load loads a configuration file written as yaml.
func load(t *testing.T, yaml string) (Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agentd.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(path, env(nil), "/opt/agentd")
}

// A tenant's generation limits are the global ones with its own in
// place, field by field, in its defaults and its ceilings alike; an
// amount is read as written, quoted or not.
func TestGenerationLimitsForTenant(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, `
generation_limits:
  defaults: {max_tool_calls: 50, max_cost: {currency: USD, amount: 2.50}}
  ceilings: {max_tool_calls: 200, max_total_tokens: 1000000}
tenants:
  acme:
    generation_limits:
      defaults: {max_duration: 10m}
      ceilings: {max_tool_turns: 40, max_cost: {currency: USD, amount: "5"}}
  globex: {}
`)
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := cfg.ForTenant("acme")
	want := GenerationLimits{
		Defaults: LimitValues{MaxToolCalls: 50, MaxCost: &Money{Currency: "USD", Amount: "2.50"}, MaxDuration: 10 * time.Minute},
		Ceilings: LimitValues{MaxToolTurns: 40, MaxToolCalls: 200, MaxTotalTokens: 1000000, MaxCost: &Money{Currency: "USD", Amount: "5"}},
	}
	if diff := cmp.Diff(want, acme.GenerationLimits); diff != "" {
		t.Errorf("acme's generation limits (-want +got):\n%s", diff)
	}
	globex, _ := cfg.ForTenant("globex")
	want = GenerationLimits{
		Defaults: LimitValues{MaxToolCalls: 50, MaxCost: &Money{Currency: "USD", Amount: "2.50"}, MaxDuration: time.Hour},
		Ceilings: LimitValues{MaxToolTurns: MaxToolTurnsLimit, MaxToolCalls: 200, MaxTotalTokens: 1000000},
	}
	if diff := cmp.Diff(want, globex.GenerationLimits); diff != "" {
		t.Errorf("globex's generation limits (-want +got):\n%s", diff)
	}
	if n, err := acme.GenerationLimits.Defaults.MaxCost.Nanos(); err != nil || n != 2_500_000_000 {
		t.Errorf("2.50 USD = %d nanos, %v; want 2500000000", n, err)
	}
}

// Every problem of the generation limits is refused at once, naming its
// setting: a value beyond its bounds, money that is not, a default above
// its ceiling (generation.max_tool_turns standing for an unset default).
func TestGenerationLimitsRefused(t *testing.T) {
	t.Parallel()
	_, err := load(t, `
generation:
  max_tool_turns: 30
generation_limits:
  defaults: {max_tool_calls: 300, max_cost: {currency: usd, amount: 1e3}}
  ceilings: {max_tool_calls: 200000, max_duration: -1s}
tenants:
  acme:
    generation_limits:
      defaults: {max_total_tokens: 500}
      ceilings: {max_tool_turns: 20, max_total_tokens: 100, max_cost: {currency: EUR, amount: "0"}}
`)
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{
		"generation_limits.defaults.max_cost.currency",
		`generation_limits.defaults.max_cost.amount: "1e3" is not an amount`,
		"generation_limits.ceilings.max_tool_calls: must be 1..100000, got 200000",
		"generation_limits.ceilings.max_duration: must not be negative",
		"tenants.acme.generation_limits.defaults.max_tool_turns: must be within tenants.acme.generation_limits.ceilings.max_tool_turns",
		"tenants.acme.generation_limits.defaults.max_total_tokens: must be within",
		"tenants.acme.generation_limits.ceilings.max_cost.amount: must be more than 0",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}
