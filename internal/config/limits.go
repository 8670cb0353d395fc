package config

import (
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/pricing"
)

// MaxToolCallsLimit caps a limit of tool calls: a request's
// agent.limits.max_tool_calls, a default and a ceiling.
const MaxToolCallsLimit = 100000

// GenerationLimits bound each generation of a tenant (docs/limits.md):
// the limits a generation gets where its agent sets none, and the most
// its agent may set or an approval may raise a limit to. A generation
// that reaches one ends, fails or pauses as its agent's on_limit says.
type GenerationLimits struct {
	// Defaults are the limits of a generation whose agent sets none of
	// its own.
	Defaults LimitValues `yaml:"defaults"`
	// Ceilings are the most a generation's agent may set, and the most
	// an approval may raise a limit to. A ceiling set without a default
	// is the default too.
	Ceilings LimitValues `yaml:"ceilings"`
}

// LimitValues are a generation's limits; an unset one is none.
type LimitValues struct {
	// MaxToolTurns caps the model turns that end in tool calls, 1..1000.
	MaxToolTurns int `yaml:"max_tool_turns" default:"generation.max_tool_turns"`
	// MaxToolCalls caps the tool calls, counted across pauses,
	// 1..100000.
	MaxToolCalls int `yaml:"max_tool_calls" default:"none"`
	// MaxTotalTokens caps the tokens of the model calls (input, output,
	// cache reads and writes together), counted across pauses.
	MaxTotalTokens int `yaml:"max_total_tokens" default:"none"`
	// MaxCost caps what the model calls cost at agentd's price table,
	// in the currency of the model's price. A generation whose model has
	// no price in it cannot start while it applies (FAILED_PRECONDITION).
	MaxCost *Money `yaml:"max_cost"`
	// MaxDuration caps the time the generation runs: from its start, or
	// each resume or adoption, to its end or pause, summed.
	MaxDuration time.Duration `yaml:"max_duration" default:"none"`
}

// Money is an amount of one currency, as a configuration writes it.
type Money struct {
	// Currency is the ISO 4217 code of the currency: USD, EUR.
	Currency string `yaml:"currency"`
	// Amount is a decimal of the currency's unit, written exactly, at
	// most nine decimals and no exponent: "2.50", "0.075". It is read as
	// a decimal, never as a floating-point number.
	Amount string `yaml:"amount"`
}

// Nanos is m's amount in billionths of its currency's unit.
func (m Money) Nanos() (int64, error) { return pricing.ParseAmount(m.Amount) }

// over is global with l's values in place where l sets them, field by
// field.
func (l GenerationLimits) over(global GenerationLimits) GenerationLimits {
	fillUnset(&l.Defaults, global.Defaults)
	fillUnset(&l.Ceilings, global.Ceilings)
	return l
}

// validate checks each value of l, at setting, within its bounds.
func (l GenerationLimits) validate(setting string, bad func(string, ...any)) {
	l.Defaults.validate(setting+".defaults", bad)
	l.Ceilings.validate(setting+".ceilings", bad)
}

// checkDefaults checks that each default of l, the limits in effect at
// setting, is within its ceiling, maxToolTurns standing for an unset
// default of max_tool_turns. A ceiling without a default is the default
// too.
func (l GenerationLimits) checkDefaults(setting string, maxToolTurns int, bad func(string, ...any)) {
	d, c := l.Defaults, l.Ceilings
	if d.MaxToolTurns == 0 {
		d.MaxToolTurns = maxToolTurns
	}
	for _, pair := range []struct {
		key          string
		value, limit int64
	}{
		{"max_tool_turns", int64(d.MaxToolTurns), int64(c.MaxToolTurns)},
		{"max_tool_calls", int64(d.MaxToolCalls), int64(c.MaxToolCalls)},
		{"max_total_tokens", int64(d.MaxTotalTokens), int64(c.MaxTotalTokens)},
	} {
		if pair.limit > 0 && pair.value > pair.limit {
			bad("%s.defaults.%s: must be within %s.ceilings.%s (%d), got %d", setting, pair.key, setting, pair.key, pair.limit, pair.value)
		}
	}
	if c.MaxDuration > 0 && d.MaxDuration > c.MaxDuration {
		bad("%s.defaults.max_duration: must be within %s.ceilings.max_duration (%s), got %s", setting, setting, c.MaxDuration, d.MaxDuration)
	}
	if d.MaxCost == nil || c.MaxCost == nil {
		return
	}
	n, _ := d.MaxCost.Nanos()
	limit, _ := c.MaxCost.Nanos()
	if d.MaxCost.Currency != c.MaxCost.Currency || n > limit {
		bad("%s.defaults.max_cost: must be within %s.ceilings.max_cost (%s), got %s", setting, setting, c.MaxCost, d.MaxCost)
	}
}

// validate checks each value at setting within its bounds.
func (v LimitValues) validate(setting string, bad func(string, ...any)) {
	if n := v.MaxToolTurns; n < 0 || n > MaxToolTurnsLimit {
		bad("%s.max_tool_turns: must be 1..%d, got %d", setting, MaxToolTurnsLimit, n)
	}
	if n := v.MaxToolCalls; n < 0 || n > MaxToolCallsLimit {
		bad("%s.max_tool_calls: must be 1..%d, got %d", setting, MaxToolCallsLimit, n)
	}
	if v.MaxTotalTokens < 0 {
		bad("%s.max_total_tokens: must not be negative, got %d", setting, v.MaxTotalTokens)
	}
	if v.MaxDuration < 0 {
		bad("%s.max_duration: must not be negative, got %s", setting, v.MaxDuration)
	}
	if m := v.MaxCost; m != nil {
		m.validate(setting+".max_cost", bad)
	}
}

// validate checks an amount of money at setting: a currency, and a
// positive amount written exactly.
func (m Money) validate(setting string, bad func(string, ...any)) {
	for _, p := range m.problems(setting) {
		bad("%s", p)
	}
}

// problems are what is wrong with an amount of money at setting.
func (m Money) problems(setting string) []string {
	var out []string
	if !pricing.ValidCurrency(m.Currency) {
		out = append(out, fmt.Sprintf("%s.currency: %q is not an ISO 4217 currency code; write its three capital letters, e.g. USD or EUR", setting, m.Currency))
	}
	n, err := m.Nanos()
	switch {
	case err != nil:
		out = append(out, fmt.Sprintf("%s.amount: %q is not an amount: %v", setting, m.Amount, err))
	case n == 0:
		out = append(out, fmt.Sprintf("%s.amount: must be more than 0", setting))
	}
	return out
}

// String is m as the reference and messages show it: "2.50 USD".
func (m Money) String() string { return fmt.Sprintf("%s %s", m.Amount, m.Currency) }
