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
