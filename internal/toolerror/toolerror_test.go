package toolerror

import (
	"encoding/json"
	"testing"
)

// TestJSON: one rendering of {"error": ...} for the model, server and
// bridge alike; '<', '>' and '&' stay as written, and the result is JSON
// whose error is the message.
func TestJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, msg, want string
	}{
		{"plain", "declined by user", `{"error":"declined by user"}`},
		{"no HTML escaping", `a < b && c > d`, `{"error":"a < b && c > d"}`},
		{"markup as written", `<tool name="x">`, `{"error":"<tool name=\"x\">"}`},
		{"quotes and backslashes", `no tool named "a\b"`, `{"error":"no tool named \"a\\b\""}`},
		{"control characters", "line 1\nline 2\t.", `{"error":"line 1\nline 2\t."}`},
		{"non-ASCII as is", "échec: 失败", `{"error":"échec: 失败"}`},
		{"empty", "", `{"error":""}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := JSON(tc.msg)
			if got != tc.want {
				t.Errorf("JSON(%q) = %s, want %s", tc.msg, got, tc.want)
			}
			var back map[string]string
			if err := json.Unmarshal([]byte(got), &back); err != nil || len(back) != 1 || back["error"] != tc.msg {
				t.Errorf("JSON(%q) = %s reads back as %v (%v)", tc.msg, got, back, err)
			}
		})
	}
}
