package providers

import "testing"

// One rule for every adapter's tool-call arguments.
func TestCompactArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, raw, want string }{
		{"none", "", "{}"},
		{"blank", " \n\t", "{}"},
		{"null", " null ", "{}"},
		{"an object", "{\"b\": 2,\n \"a\": [1, 2]}", `{"b":2,"a":[1,2]}`},
		{"an empty object", "{ }", "{}"},
		{"large numbers exactly", `{"n": 12345678901234567890}`, `{"n":12345678901234567890}`},
		{"JSON that is not an object, for the bridge to refuse", ` [1, "x"] `, `[1,"x"]`},
		{"a string", `"hi"`, `"hi"`},
		{"cut off, as the model wrote it", `{"x": `, `{"x": `},
		{"two values, as the model wrote them", `{"a":1} {"b":2}`, `{"a":1} {"b":2}`},
		{"not JSON at all", "path=/tmp", "path=/tmp"},
	} {
		if got := CompactArguments([]byte(tc.raw)); got != tc.want {
			t.Errorf("%s: CompactArguments(%q) = %q, want %q", tc.name, tc.raw, got, tc.want)
		}
	}
}

// X-O2: the GenAI conventions' provider names, where they have one.
func TestGenAIName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"anthropic": "anthropic", "openai": "openai", "openai-responses": "openai", "azure": "azure.ai.openai",
		"deepseek": "deepseek", "gemini": "gcp.gemini", "ollama": "ollama", "openrouter": "openrouter",
		"requesty": "requesty", "mock": "mock", "script": "script",
	} {
		if got := GenAIName(name); got != want {
			t.Errorf("GenAIName(%q) = %q, want %q", name, got, want)
		}
	}
}

// A context without an observer reports to nobody, without failing.
func TestObserveWithoutObserver(t *testing.T) {
	t.Parallel()
	o := Observe(t.Context())
	o.Route("x")
	o.Sending("h", 1)
	o.Retrying(Retry{Attempt: 1})
	var routed string
	Observe(WithObserver(t.Context(), &Observer{Routed: func(n string) { routed = n }})).Route("anthropic")
	if routed != "anthropic" {
		t.Errorf("routed %q, want anthropic", routed)
	}
}
