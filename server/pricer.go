package server

import (
	"context"
	"log/slog"
	"math/big"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
)

// Pricer prices a model call's tokens: agentd's price table
// (internal/pricing) satisfies it.
type Pricer interface {
	// Cost prices u's tokens for provider and model: never nil.
	Cost(provider, model string, u *agentdv1.Usage) *agentdv1.Cost
}

// price sets u's cost, what its tokens cost the generation's model, and
// counts it in agentd.cost; nothing without a price table.
func (g *generation) price(ctx context.Context, u *agentdv1.Usage) {
	if g.s.prices == nil || u == nil {
		return
	}
	provider, model := pricedAs(g.plan.provider, g.plan.agent.GetProvider(), g.plan.agent.GetModel())
	u.Cost = g.s.prices.Cost(provider, model, u)
	g.s.meters.spent(ctx, g.tenant, provider, model, u.Cost)
}

// resolver is a provider that hands each model to another provider: the
// router.
type resolver interface {
	Resolve(model string) (providers.Provider, string, error)
}

// pricedAs is the provider and model whose prices a call of model on p
// (named name) pays: those of the provider the router hands it to, with
// the model as that provider knows it.
func pricedAs(p providers.Provider, name, model string) (string, string) {
	if r, ok := p.(resolver); ok {
		if to, m, err := r.Resolve(model); err == nil {
			return to.Name(), m
		}
	}
	return name, model
}

// addCost adds c to total's cost: the amounts of one currency summed, the
// sum unknown once any part is (or once parts of two currencies meet, which
// one price table never makes), the latest pricing day kept.
func addCost(total *agentdv1.Usage, c *agentdv1.Cost) {
	if c == nil {
		return
	}
	t := total.GetCost()
	if t == nil {
		total.Cost = &agentdv1.Cost{Currency: c.GetCurrency(), Nanos: c.GetNanos(), Unknown: c.GetUnknown(), PricedOn: c.GetPricedOn()}
		return
	}
	switch {
	case t.Currency == "":
		t.Currency = c.GetCurrency()
	case c.GetCurrency() != "" && c.GetCurrency() != t.Currency:
		t.Unknown = true
		return
	}
	t.Nanos += c.GetNanos()
	t.Unknown = t.Unknown || c.GetUnknown()
	t.PricedOn = max(t.PricedOn, c.GetPricedOn())
}

// costAttrs are the end line's words for what a run cost: the amount and
// its currency, or "unknown" where some tokens had no price; none without
// a price table.
func costAttrs(c *agentdv1.Cost) []slog.Attr {
	switch {
	case c == nil:
		return nil
	case c.GetUnknown():
		return []slog.Attr{slog.String("cost", "unknown")}
	}
	return []slog.Attr{slog.String("cost", amount(c.GetNanos())), slog.String("currency", c.GetCurrency())}
}

// amount writes nanos billionths of a unit as a decimal of the unit,
// exactly: 1500000 is "0.0015".
func amount(nanos int64) string {
	return new(big.Rat).SetFrac64(nanos, 1e9).FloatString(9)
}

// spent counts a priced call's cost in agentd.cost, in the currency's unit,
// by tenant, provider, model and currency. What had no price is not
// counted: its usage says it is unknown.
func (m *meters) spent(ctx context.Context, tenant, provider, model string, c *agentdv1.Cost) {
	if c.GetNanos() == 0 {
		return
	}
	m.cost.Add(ctx, float64(c.GetNanos())/1e9, metric.WithAttributes(tenantAttr(tenant),
		attribute.String("gen_ai.provider.name", provider), attribute.String("gen_ai.request.model", model),
		attribute.String("currency", c.GetCurrency())))
}
