package bridge

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcptest"
)

// sampleFailed checks that the sample call failed with a message holding
// want: the server read the client's error.
func sampleFailed(t *testing.T, res *bridgev1.CallToolsResponse, want string) {
	t.Helper()
	if !res.GetResult().GetIsError() || !strings.Contains(res.GetResult().GetOutput(), want) {
		t.Errorf("sample answered %v, want the tool's failure with %q", res, want)
	}
}

// TestSampling: X-M5. A server's sampling/createMessage during a
// tools/call reaches agentd on the session's stream, naming the server
// and the call, with its messages as text, system prompt and max tokens;
// agentd's answer (the policy allows, or a person approved) goes back as
// an assistant text message with its model and stop reason, and an
// error answer (the policy denies, the person refused) as the server's
// request's failure. A request that offers tools, or content other than
// text, is refused with an error the server reads, and agentd is not
// asked.
func TestSampling(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(c *config.Bridge) { c.AllowPrivateNetworks = true })
	for _, srv := range elicitServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			id, requests, stream := openAsking(t, ctx, f.client, srv.spec(t))

			// X-M5 answered.
			startCall(t, stream, 1, "asker", "sample", `{"prompt":"Say hi","system":"Be brief.","max_tokens":50}`)
			r := nextRequest(t, requests)
			want := &bridgev1.ServerRequest{Id: r.GetId(), ServerName: "asker", CallId: 1, Kind: &bridgev1.ServerRequest_Sampling{Sampling: &bridgev1.SamplingRequest{
				Messages: []*bridgev1.SamplingMessage{{Role: "user", Text: "Say hi"}}, SystemPrompt: "Be brief.", MaxTokens: 50,
			}}}
			if diff := cmp.Diff(want, r, protocmp.Transform()); diff != "" {
				t.Errorf("sampling request (-want +got):\n%s", diff)
			}
			if _, err := f.client.AnswerServerRequest(t.Context(), &bridgev1.AnswerServerRequestRequest{SessionId: id, Id: r.GetId(),
				Answer: &bridgev1.AnswerServerRequestRequest_Sampling{Sampling: &bridgev1.SamplingResult{Text: "hi", Model: "m-1", StopReason: "endTurn"}}}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(mcptest.SampleOutput{Role: "assistant", Text: "hi", Model: "m-1", StopReason: "endTurn"}, toolOutput[mcptest.SampleOutput](t, "sample", recvAnswer(t, stream))); diff != "" {
				t.Errorf("what the server received (-want +got):\n%s", diff)
			}

			// X-M5 refused by agentd.
			startCall(t, stream, 2, "asker", "sample", `{"prompt":"Say hi"}`)
			r = nextRequest(t, requests)
			st := fault.Status(fault.New(fault.Permission, "sampling is denied to the MCP server")).Proto()
			if _, err := f.client.AnswerServerRequest(t.Context(), &bridgev1.AnswerServerRequestRequest{SessionId: id, Id: r.GetId(),
				Answer: &bridgev1.AnswerServerRequestRequest_Error{Error: &bridgev1.CallError{Code: st.GetCode(), Message: st.GetMessage()}}}); err != nil {
				t.Fatal(err)
			}
			sampleFailed(t, recvAnswer(t, stream), "sampling is denied to the MCP server")

			// X-M5 tools, and images, are refused without asking agentd.
			startCall(t, stream, 3, "asker", "sample", `{"prompt":"Look it up","tools":true}`)
			sampleFailed(t, recvAnswer(t, stream), "sampling with tools is not supported")
			startCall(t, stream, 4, "asker", "sample", `{"image":true}`)
			sampleFailed(t, recvAnswer(t, stream), "agentd samples text only")
			select {
			case r := <-requests:
				t.Errorf("agentd was asked %v", r)
			default:
			}
		})
	}
}
