package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// TestResumeAnswerFlags: --authorize and --input parse into the resume's
// authorization and input responses; malformed values are refused.
func TestResumeAnswerFlags(t *testing.T) {
	var a authorizeFlags
	var in inputFlags
	for _, v := range []string{"authorization_1=http://127.0.0.1:8976/oauth/callback?code=c&state=s"} {
		if err := a.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{`input_1=accept:{"name":"Ada"}`, "input_2=decline", "input_3=cancel"} {
		if err := in.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	content, _ := structpb.NewStruct(map[string]any{"name": "Ada"})
	wantA := authorizeFlags{{RequestId: "authorization_1", RedirectUrl: "http://127.0.0.1:8976/oauth/callback?code=c&state=s"}}
	wantIn := inputFlags{
		{RequestId: "input_1", Action: agentdv1.InputAction_INPUT_ACTION_ACCEPT, Content: content},
		{RequestId: "input_2", Action: agentdv1.InputAction_INPUT_ACTION_DECLINE},
		{RequestId: "input_3", Action: agentdv1.InputAction_INPUT_ACTION_CANCEL},
	}
	if d := cmp.Diff(wantA, a, protocmp.Transform()); d != "" {
		t.Errorf("--authorize (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantIn, in, protocmp.Transform()); d != "" {
		t.Errorf("--input (-want +got):\n%s", d)
	}
	for _, bad := range []string{"", "noequals", "=x", "input_1=accept:[1]", "input_1=maybe"} {
		if err := in.Set(bad); err == nil {
			t.Errorf("--input %q accepted", bad)
		}
	}
	for _, bad := range []string{"", "authorization_1", "authorization_1=", "=http://x"} {
		if err := a.Set(bad); err == nil {
			t.Errorf("--authorize %q accepted", bad)
		}
	}
}
