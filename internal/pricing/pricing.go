// Package pricing is agentd's price table: what a model's tokens cost.
// The table ships in the binary (prices.yaml: the providers' list prices,
// each with the day it was taken); a configuration replaces or adds
// entries model by model (Load). Table.Cost prices a model call's usage
// exactly, in billionths of the currency's unit.
package pricing

import (
	"math"
	"math/bits"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// AnyModel, as a model's name in the table, prices every model of its
// provider that has no entry of its own (a local provider's, at zero).
const AnyModel = "*"

// Table is a price table, never changed once loaded: safe for concurrent
// use.
type Table struct {
	prices map[modelKey]*price
}

type modelKey struct{ provider, model string }

// price is one entry of the table: what a million tokens of each kind
// cost, in billionths of the currency's unit, or none where the entry
// gives no price for the kind.
type price struct {
	currency string
	// date is the day the prices were taken, YYYY-MM-DD.
	date                                            string
	input, output, cacheRead, cacheWrite, reasoning int64
}

// none marks a kind of token the entry gives no price for.
const none = -1

// perMillion is what a price counts tokens by.
const perMillion = 1_000_000

// Cost prices u's tokens at the table's price for provider and model:
// each kind's tokens times its price, summed exactly and rounded half up
// to a billionth once. Output tokens, reasoning included (usage does not
// count reasoning apart), are priced at the output price. A model the
// table has no entry for has an unknown cost; so has one whose usage holds
// tokens of a kind its entry gives no price for, the nanos then counting
// what was priced. Never nil; it allocates only the returned message.
func (t *Table) Cost(provider, model string, u *agentdv1.Usage) *agentdv1.Cost {
	p := t.lookup(provider, model)
	if p == nil {
		return &agentdv1.Cost{Unknown: true}
	}
	kinds := [...]struct{ tokens, rate int64 }{
		{u.GetInputTokens(), p.input},
		{u.GetOutputTokens(), p.output},
		{u.GetCacheReadInputTokens(), p.cacheRead},
		{u.GetCacheWriteInputTokens(), p.cacheWrite},
	}
	var s sum
	unknown := false
	for _, k := range kinds {
		switch {
		case k.tokens <= 0:
		case k.rate == none:
			unknown = true
		default:
			s.add(k.tokens, k.rate)
		}
	}
	return &agentdv1.Cost{Currency: p.currency, Nanos: s.rounded(), Unknown: unknown, PricedOn: p.date}
}

// lookup is the entry that prices provider's model: the model's own,
// else that of the model without its date suffix
// ("claude-sonnet-4-5-20250929" is priced as "claude-sonnet-4-5"), else
// the provider's "*"; nil when there is none.
func (t *Table) lookup(provider, model string) *price {
	if p, ok := t.prices[modelKey{provider, model}]; ok {
		return p
	}
	if base, ok := undated(model); ok {
		if p, ok := t.prices[modelKey{provider, base}]; ok {
			return p
		}
	}
	return t.prices[modelKey{provider, AnyModel}]
}

// dateSuffixes are the shapes of the dates that providers append to a
// model's name to pin a snapshot, d a digit.
var dateSuffixes = [...]string{"-dddddddd", "-dddd-dd-dd"}

// undated is model without its date suffix, if it has one.
func undated(model string) (string, bool) {
	for _, shape := range dateSuffixes {
		if n := len(model) - len(shape); n > 0 && fits(model[n:], shape) {
			return model[:n], true
		}
	}
	return "", false
}

// fits reports whether s has shape: a digit where shape has d, shape's
// byte elsewhere.
func fits(s, shape string) bool {
	for i := range len(shape) {
		digit := s[i] >= '0' && s[i] <= '9'
		if shape[i] == 'd' && !digit || shape[i] != 'd' && s[i] != shape[i] {
			return false
		}
	}
	return true
}

// sum is a sum of tokens times billionths per million tokens, in 128 bits
// so that no product or sum of them overflows.
type sum struct{ hi, lo uint64 }

// add adds tokens (positive) at rate billionths per million.
func (s *sum) add(tokens, rate int64) {
	hi, lo := bits.Mul64(uint64(tokens), uint64(rate))
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, lo, 0)
	s.hi += hi + carry
}

// rounded is the sum in billionths, rounded half up; past what an int64
// holds, the most it holds.
func (s sum) rounded() int64 {
	lo, carry := bits.Add64(s.lo, perMillion/2, 0)
	hi := s.hi + carry
	if hi >= perMillion {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, perMillion)
	return int64(min(q, math.MaxInt64))
}
