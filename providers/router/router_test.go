package router_test

import (
	"context"
	"iter"
	"slices"
	"testing"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/router"
)

// named records the model each request reached it with.
type named struct {
	name  string
	model *string
}

func (n named) Name() string                         { return n.name }
func (n named) Capabilities() providers.Capabilities { return providers.Capabilities{} }
func (n named) Stream(_ context.Context, req *providers.Request) iter.Seq2[providers.Event, error] {
	*n.model = req.Model
	return func(yield func(providers.Event, error) bool) { yield(&providers.Stop{}, nil) }
}

func TestRouting(t *testing.T) {
	t.Parallel()
	got := map[string]*string{}
	var ps []providers.Provider
	for _, n := range []string{"anthropic", "openai", "openai-responses", "gemini", "deepseek", "ollama"} {
		s := ""
		got[n] = &s
		ps = append(ps, named{n, &s})
	}
	reg, err := providers.NewRegistry(ps...)
	if err != nil {
		t.Fatal(err)
	}
	r := router.New(reg.Lookup)
	for _, tc := range []struct{ model, provider, wantModel string }{
		{"anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"},
		{"openai-responses/gpt-5", "openai-responses", "gpt-5"},
		{"ollama/llama3.2:3b", "ollama", "llama3.2:3b"},
		{"claude-haiku-4-5", "anthropic", "claude-haiku-4-5"},
		{"gpt-4o-mini", "openai", "gpt-4o-mini"},
		{"o3-mini", "openai", "o3-mini"},
		{"gemini-2.5-flash", "gemini", "gemini-2.5-flash"},
		{"deepseek-v4-flash", "deepseek", "deepseek-v4-flash"},
	} {
		// X-O2: telemetry hears of the provider chosen, not of the router.
		var routed []string
		ctx := providers.WithObserver(t.Context(), &providers.Observer{Routed: func(name string) { routed = append(routed, name) }})
		for range r.Stream(ctx, &providers.Request{Model: tc.model}) {
		}
		if *got[tc.provider] != tc.wantModel {
			t.Errorf("%s: %s saw model %q, want %q", tc.model, tc.provider, *got[tc.provider], tc.wantModel)
		}
		if !slices.Equal(routed, []string{tc.provider}) {
			t.Errorf("%s: routed to %q, want %q", tc.model, routed, tc.provider)
		}
	}
	for _, bad := range []string{"mistral-large", "router/gpt-4o", "nobody/x"} {
		if err := r.(providers.ModelValidator).ValidateModel(bad); fault.KindOf(err) != fault.Invalid {
			t.Errorf("ValidateModel(%q) = %v, want Invalid", bad, err)
		}
	}
}

// thinker streams reasoning, one block unlabelled and one labelled.
type thinker struct{}

func (thinker) Name() string                         { return "anthropic" }
func (thinker) Capabilities() providers.Capabilities { return providers.Capabilities{} }
func (thinker) Stream(context.Context, *providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		_ = yield(&providers.Reasoning{Text: "hm", Signature: "sig"}, nil) &&
			yield(&providers.Reasoning{Signature: "x", Provider: "elsewhere"}, nil) &&
			yield(&providers.Stop{}, nil)
	}
}

// TestReasoningLabelled proves that reasoning streamed through the router
// names the provider that produced it, so the loop files it under that
// provider and not under "router".
func TestReasoningLabelled(t *testing.T) {
	t.Parallel()
	reg, err := providers.NewRegistry(thinker{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev, err := range router.New(reg.Lookup).Stream(t.Context(), &providers.Request{Model: "claude-sonnet-4-5"}) {
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := ev.(*providers.Reasoning); ok {
			got = append(got, r.Provider)
		}
	}
	if want := []string{"anthropic", "elsewhere"}; !slices.Equal(got, want) {
		t.Errorf("reasoning providers = %q, want %q", got, want)
	}
}

// keyless needs an API key it does not have, for every model.
type keyless struct{ named }

func (keyless) CheckConfig(string) error {
	return fault.New(fault.FailedPrecondition, "anthropic: no API key is configured")
}

// The router's configuration check is that of the provider a model routes
// to: what it lacks, nothing for one that lacks nothing, and nothing for
// a model it cannot route (ValidateModel's to report).
func TestCheckConfigRoutes(t *testing.T) {
	t.Parallel()
	var seen string
	reg, err := providers.NewRegistry(keyless{named{"anthropic", &seen}}, named{"openai", &seen})
	if err != nil {
		t.Fatal(err)
	}
	r := router.New(reg.Lookup).(providers.ConfigChecker)
	if err := r.CheckConfig("claude-haiku-4-5"); fault.KindOf(err) != fault.FailedPrecondition {
		t.Errorf("CheckConfig of a model of a provider without a key = %v, want FailedPrecondition", err)
	}
	for _, model := range []string{"gpt-4o-mini", "openai/gpt-5", "mistral-large"} {
		if err := r.CheckConfig(model); err != nil {
			t.Errorf("CheckConfig(%q) = %v, want nil", model, err)
		}
	}
}

// schemaTaker takes an output schema for the models and turns it says,
// recording the model it was asked about.
type schemaTaker struct {
	named
	takes func(model string, withTools bool) bool
}

func (s schemaTaker) Capabilities() providers.Capabilities {
	return providers.Capabilities{Output: func(model string, withTools bool) bool {
		*s.model = model
		return s.takes(model, withTools)
	}}
}

// Whether a router model takes an output schema is the answer of the
// provider it routes to, asked about the model without its prefix; a
// provider without the capability, and a model the router cannot route,
// say no.
func TestOutputRoutes(t *testing.T) {
	t.Parallel()
	var asked, unused string
	reg, err := providers.NewRegistry(
		schemaTaker{named{"anthropic", &asked}, func(_ string, withTools bool) bool { return !withTools }},
		named{"openai", &unused},
	)
	if err != nil {
		t.Fatal(err)
	}
	output := router.New(reg.Lookup).Capabilities().Output
	for _, tc := range []struct {
		model     string
		withTools bool
		want      bool
		wantAsked string
	}{
		{"claude-sonnet-4-5", false, true, "claude-sonnet-4-5"},
		{"anthropic/claude-opus-4-5", false, true, "claude-opus-4-5"},
		{"anthropic/claude-opus-4-5", true, false, "claude-opus-4-5"},
		{"gpt-5", false, false, ""},
		{"mistral-large", false, false, ""},
	} {
		asked = ""
		if got := output(tc.model, tc.withTools); got != tc.want || asked != tc.wantAsked {
			t.Errorf("Output(%q, tools %v) = %v, asking about %q; want %v, asking about %q", tc.model, tc.withTools, got, asked, tc.want, tc.wantAsked)
		}
	}
}
