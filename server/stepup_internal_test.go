package server

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// TestStepUpsKept: X-M2, the step-ups a generation asked a person for are
// in its checkpoints, paused and running alike (conversation), sorted; a
// run that continues one (a resume, an adoption) knows them: the same
// server's step-up to the same scope set is not asked again, while
// another set or another server is.
func TestStepUpsKept(t *testing.T) {
	t.Parallel()
	g := &generation{id: "gen_1", plan: &plan{agent: &agentdv1.Agent{Provider: "script"}}, answered: &answerSet{}}
	for _, su := range []struct {
		server string
		scopes []string
	}{{"docs", []string{"read", "write"}}, {"crm", []string{"admin"}}, {"crm", nil}} {
		if g.stepUps.was(su.server, su.scopes) {
			t.Fatalf("was(%s, %v) = true on a new generation", su.server, su.scopes)
		}
		g.stepUps.note(su.server, su.scopes)
	}
	if !g.stepUps.was("crm", []string{"admin"}) {
		t.Error("was(crm, admin) = false once noted")
	}

	data, err := proto.Marshal(g.conversation(nil))
	if err != nil {
		t.Fatal(err)
	}
	cp := &statev1.Checkpoint{}
	if err := proto.Unmarshal(data, cp); err != nil {
		t.Fatal(err)
	}
	want := []*statev1.StepUp{{ServerName: "crm"}, {ServerName: "crm", Scopes: []string{"admin"}}, {ServerName: "docs", Scopes: []string{"read", "write"}}}
	if diff := cmp.Diff(want, cp.GetStepUps(), protocmp.Transform()); diff != "" {
		t.Errorf("the checkpoint's step-ups (-want +got):\n%s", diff)
	}

	next := (&Service{}).continued("acme", cp)
	tests := []struct {
		server string
		scopes []string
		first  bool
	}{
		{"docs", []string{"read", "write"}, false},
		{"crm", []string{"admin"}, false},
		{"crm", nil, false},
		{"crm", []string{"admin", "write"}, true},
		{"files", []string{"admin"}, true},
	}
	for _, tc := range tests {
		if got := !next.stepUps.was(tc.server, tc.scopes); got != tc.first {
			t.Errorf("after the checkpoint, was(%s, %v) = %v, want %v", tc.server, tc.scopes, !got, !tc.first)
		}
	}
}
