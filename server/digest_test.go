package server

import "testing"

// The approval digest binds server, tool and arguments: the arguments'
// key order and spacing do not matter, their values (large integers
// included) do.
func TestApprovalDigest(t *testing.T) {
	t.Parallel()
	base := approvalDigest("files", "delete", `{"path":"a.txt","n":1}`)
	tests := []struct {
		name       string
		server     string
		tool, args string
		same       bool
	}{
		{"key order and spacing", "files", "delete", `{ "n": 1, "path": "a.txt" }`, true},
		{"another server", "other", "delete", `{"path":"a.txt","n":1}`, false},
		{"another tool", "files", "remove", `{"path":"a.txt","n":1}`, false},
		{"another value", "files", "delete", `{"path":"b.txt","n":1}`, false},
	}
	for _, tt := range tests {
		if got := approvalDigest(tt.server, tt.tool, tt.args) == base; got != tt.same {
			t.Errorf("%s: same digest = %v, want %v", tt.name, got, tt.same)
		}
	}
	if approvalDigest("s", "t", `{"id":9007199254740993}`) == approvalDigest("s", "t", `{"id":9007199254740992}`) {
		t.Error("integers beyond 2^53 that differ digest alike")
	}
}
