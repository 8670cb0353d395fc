// Package router is the "router" provider, agentd's equivalent of
// RubyLLM: it picks the adapter from the model name and delegates to it,
// adding nothing to the wire.
//
// A model "<provider>/<model>" goes to that registered provider with the
// rest as its model ("anthropic/claude-sonnet-4-5"); a model without a
// prefix is matched against a small registry of well-known names:
//
//	claude-*                               anthropic
//	gpt-*, chatgpt-*, o1*, o3*, o4*        openai
//	gemini-*                               gemini
//	deepseek-*                             deepseek
//
// Through the router the provider is known only per request, so every MCP
// server of a router agent runs in agentd's bridge. Reasoning is labelled
// with the provider that produced it, so that a conversation can move
// between models without one provider receiving another's signatures.
// Whether a model takes an output schema (Capabilities.Output) is the
// routed provider's answer for it.
package router

import (
	"context"
	"iter"
	"strings"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

// Name is the router's provider name.
const Name = "router"

// Lookup finds a provider by name (a providers.Registry's Lookup).
type Lookup func(name string) (providers.Provider, bool)

// patterns is the registry of model names without a provider prefix.
var patterns = []struct {
	prefixes []string
	provider string
}{
	{[]string{"claude-"}, "anthropic"},
	{[]string{"gpt-", "chatgpt-", "o1", "o3", "o4"}, "openai"},
	{[]string{"gemini-"}, "gemini"},
	{[]string{"deepseek-"}, "deepseek"},
}

// New returns the router over the providers that lookup finds.
func New(lookup Lookup) providers.Provider { return &router{lookup: lookup} }

type router struct{ lookup Lookup }

func (*router) Name() string { return Name }

func (r *router) Capabilities() providers.Capabilities {
	return providers.Capabilities{Output: r.output}
}

// output is Capabilities.Output: that of the provider model routes to,
// for the model as that provider knows it; false for a model it cannot
// route.
func (r *router) output(model string, withTools bool) bool {
	p, routed, err := r.Resolve(model)
	if err != nil {
		return false
	}
	takes := p.Capabilities().Output
	return takes != nil && takes(routed, withTools)
}

// Resolve returns the provider and model a router model names.
func (r *router) Resolve(model string) (providers.Provider, string, error) {
	if name, rest, ok := strings.Cut(model, "/"); ok && name != Name {
		if p, found := r.lookup(name); found {
			return p, rest, nil
		}
	}
	for _, pat := range patterns {
		for _, prefix := range pat.prefixes {
			if strings.HasPrefix(model, prefix) {
				if p, found := r.lookup(pat.provider); found {
					return p, model, nil
				}
			}
		}
	}
	return nil, "", fault.New(fault.Invalid,
		"router: no provider for the model %q; name one as \"<provider>/<model>\", or use a model name starting with claude-, gpt-, chatgpt-, o1, o3, o4, gemini- or deepseek-", model)
}

// ValidateModel reports a model the router cannot route.
func (r *router) ValidateModel(model string) error {
	_, _, err := r.Resolve(model)
	return err
}

// CheckConfig reports what the provider that model routes to lacks; a
// model it cannot route is ValidateModel's to report.
func (r *router) CheckConfig(model string) error {
	p, routed, err := r.Resolve(model)
	if err != nil {
		return nil
	}
	if c, ok := p.(providers.ConfigChecker); ok {
		return c.CheckConfig(routed)
	}
	return nil
}

func (r *router) Stream(ctx context.Context, req *providers.Request) iter.Seq2[providers.Event, error] {
	p, model, err := r.Resolve(req.Model)
	if err != nil {
		return func(yield func(providers.Event, error) bool) { yield(nil, err) }
	}
	routed := *req
	routed.Model = model
	return func(yield func(providers.Event, error) bool) {
		// Telemetry names the provider that serves the turn, not the router.
		providers.Observe(ctx).Route(p.Name())
		for ev, err := range p.Stream(ctx, &routed) {
			// Reasoning belongs to the provider that produced it: only that
			// provider reads it back on later turns.
			if r, ok := ev.(*providers.Reasoning); ok && r.Provider == "" {
				r.Provider = p.Name()
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}
