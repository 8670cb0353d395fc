package bridge

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/testwait"
	"github.com/agentd/agentd/internal/toolerror"
)

func wantCode(t *testing.T, err error, code codes.Code) *status.Status {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Fatalf("err = %v, want code %v", err, code)
	}
	return st
}

// TestSession runs a session's whole life over gRPC: open, list, call,
// close, with a registered server (by ref) and with an allowed command.
func TestSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tests := []struct {
		name string
		spec *bridgev1.ServerSpec
	}{
		{"X-S1 registered server by ref", refSpec("srv", "tools")},
		{"X-S1 allowed command", commandSpec(t, "srv", mcptest.Tools, nil)},
		{"registered demo server", refSpec("srv", "demo")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id, stream := open(t, t.Context(), f.client, tc.spec)
			list, err := f.client.ListTools(t.Context(), &bridgev1.ListToolsRequest{SessionId: id})
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			if len(list.GetServers()) != 1 || list.GetServers()[0].GetServerName() != "srv" {
				t.Fatalf("ListTools = %v, want one server, srv", list)
			}
			if !slices.ContainsFunc(list.GetServers()[0].GetTools(), func(tool *bridgev1.Tool) bool { return tool.GetName() == "echo" }) {
				t.Errorf("ListTools = %v, want echo among the tools", list)
			}
			res := call(t, f.client, id, "srv", "echo", `{"text":"hi"}`)
			if diff := cmp.Diff(&bridgev1.CallToolResponse{Output: "hi"}, res, protocmp.Transform()); diff != "" {
				t.Errorf("CallTool echo (-want +got):\n%s", diff)
			}
			if _, err := f.client.CloseSession(t.Context(), &bridgev1.CloseSessionRequest{SessionId: id}); err != nil {
				t.Fatalf("CloseSession: %v", err)
			}
			if _, err := stream.Recv(); err != io.EOF {
				t.Errorf("stream after CloseSession: %v, want EOF", err)
			}
		})
	}
}

// TestOpenSessionPermissionDenied: X-S1. A command that the configuration
// does not allow is refused, naming the setting, never the secrets.
func TestOpenSessionPermissionDenied(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tests := []struct {
		name, command string
	}{
		{"X-S1 command not allowed", "/usr/bin/env"},
		{"X-S1 allowed base name at another path", filepath.Join("/tmp", filepath.Base(f.exe))},
		{"X-S1 bare name of an allowed path", filepath.Base(f.exe)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := &bridgev1.ServerSpec{
				Name: "intruder",
				Transport: &bridgev1.ServerSpec_Stdio{Stdio: &bridgev1.StdioTarget{
					Command: tc.command, Args: []string{"--token=sk-arg"}, Env: map[string]string{"API_KEY": "sk-env"},
				}},
				ReadTimeout: durationpb.New(roomyTimeout),
			}
			err := f.openErr(t, refSpec("ok", "tools"), spec)
			st := wantCode(t, err, codes.PermissionDenied)
			for _, s := range []string{"bridge.allowed_commands", `"intruder"`, "ref"} {
				if !strings.Contains(st.Message(), s) {
					t.Errorf("message %q does not name %s", st.Message(), s)
				}
			}
			for _, s := range []string{"sk-arg", "sk-env"} {
				if strings.Contains(st.Message(), s) {
					t.Errorf("message %q contains %q", st.Message(), s)
				}
			}
		})
	}
}

// TestOpenSessionInvalid: declarations are validated before anything
// connects, every problem reported together as field violations.
func TestOpenSessionInvalid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spec := func(name string, timeout *durationpb.Duration, transport func(*bridgev1.ServerSpec)) *bridgev1.ServerSpec {
		s := &bridgev1.ServerSpec{Name: name, ReadTimeout: timeout, Transport: &bridgev1.ServerSpec_Ref{Ref: "tools"}}
		if transport != nil {
			transport(s)
		}
		return s
	}
	ok := durationpb.New(roomyTimeout)
	ref := func(r string) func(*bridgev1.ServerSpec) {
		return func(s *bridgev1.ServerSpec) { s.Transport = &bridgev1.ServerSpec_Ref{Ref: r} }
	}
	none := func(s *bridgev1.ServerSpec) { s.Transport = nil }
	url := func(u string) func(*bridgev1.ServerSpec) {
		return func(s *bridgev1.ServerSpec) {
			s.Transport = &bridgev1.ServerSpec_Http{Http: &bridgev1.HTTPTarget{Url: u, Authorization: "tok-secret"}}
		}
	}
	denied := func(s *bridgev1.ServerSpec) {
		s.Transport = &bridgev1.ServerSpec_Stdio{Stdio: &bridgev1.StdioTarget{Command: "/usr/bin/env"}}
	}
	tests := []struct {
		name  string
		specs []*bridgev1.ServerSpec
		want  []violation
	}{
		{"R-D3 empty name", []*bridgev1.ServerSpec{spec("", ok, nil)},
			[]violation{{"servers[0].name", "must not be empty"}}},
		{"R-D3 duplicate names", []*bridgev1.ServerSpec{spec("a", ok, nil), spec("b", ok, nil), spec("a", ok, nil)},
			[]violation{{"servers[2].name", `"a" is used twice`}}},
		{"R-D6 zero read_timeout", []*bridgev1.ServerSpec{spec("a", durationpb.New(0), nil)},
			[]violation{{"servers[0].read_timeout", "positive"}}},
		{"R-D6 negative read_timeout", []*bridgev1.ServerSpec{spec("a", durationpb.New(-roomyTimeout), nil)},
			[]violation{{"servers[0].read_timeout", "positive"}}},
		{"R-D6 missing read_timeout", []*bridgev1.ServerSpec{spec("a", nil, nil)},
			[]violation{{"servers[0].read_timeout", "positive"}}},
		{"X-S1 unknown ref", []*bridgev1.ServerSpec{spec("a", ok, ref("nope"))},
			[]violation{{"servers[0].ref", `"nope"`}}},
		{"R-D2 no transport", []*bridgev1.ServerSpec{spec("a", ok, none)},
			[]violation{{"servers[0]", "http, stdio or ref"}}},
		{"http URL that is not http", []*bridgev1.ServerSpec{spec("a", ok, url("ftp://files.example/secret-path?key=sk-123"))},
			[]violation{{"servers[0].http.url", "http or https"}}},
		{"R-D1 all problems together", []*bridgev1.ServerSpec{
			spec("", durationpb.New(0), ref("nope")),
			spec("x", ok, none),
			spec("x", durationpb.New(-1), nil),
		}, []violation{
			{"servers[0].name", "must not be empty"},
			{"servers[0].read_timeout", "positive"},
			{"servers[0].ref", `"nope"`},
			{"servers[1]", "http, stdio or ref"},
			{"servers[2].name", `"x" is used twice`},
			{"servers[2].read_timeout", "positive"},
		}},
		{"X-D9 an invalid declaration makes a denied command InvalidArgument, both listed", []*bridgev1.ServerSpec{spec("", ok, denied)},
			[]violation{{"servers[0].name", "must not be empty"}, {"servers[0].stdio.command", "bridge.allowed_commands"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := f.openErr(t, tc.specs...)
			st := wantCode(t, err, codes.InvalidArgument)
			wantViolations(t, st, tc.want)
			for _, s := range []string{"secret-path", "sk-123", "tok-secret"} {
				if strings.Contains(st.Message(), s) {
					t.Errorf("message %q contains %q", st.Message(), s)
				}
			}
		})
	}
	if n := f.svc.Sessions(); n != 0 {
		t.Errorf("Sessions() = %d after refused opens", n)
	}
}

// TestOpenSessionEveryProblem: X-D9. resolve reports every problem of a
// session's servers at once: every refused env variable, every command
// and address the configuration does not allow, and every invalid
// declaration. Any invalid one makes the refusal InvalidArgument; the
// configuration's rules alone make it PermissionDenied. Either way each
// problem is a field violation naming its setting, and no value shows.
func TestOpenSessionEveryProblem(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	steered := &bridgev1.ServerSpec{Name: "steered", ReadTimeout: durationpb.New(roomyTimeout), Transport: &bridgev1.ServerSpec_Stdio{Stdio: &bridgev1.StdioTarget{
		Command: f.exe, Env: map[string]string{"NODE_OPTIONS": "--require=/tmp/sk-env-1.js", "LD_PRELOAD": "/tmp/sk-env-2.so", "API_KEY": "sk-env-3"},
	}}}
	intruder := &bridgev1.ServerSpec{Name: "intruder", ReadTimeout: durationpb.New(roomyTimeout), Transport: &bridgev1.ServerSpec_Stdio{Stdio: &bridgev1.StdioTarget{
		Command: "/usr/bin/env", Env: map[string]string{"PATH": "/tmp/sk-env-4"},
	}}}
	lan := &bridgev1.ServerSpec{Name: "lan", ReadTimeout: durationpb.New(roomyTimeout), Transport: &bridgev1.ServerSpec_Http{Http: &bridgev1.HTTPTarget{
		Url: "https://100.64.1.2/secret-path", Authorization: "tok-secret",
	}}}
	slow := refSpec("slow", "tools")
	slow.ReadTimeout = durationpb.New(0)
	denied := []violation{
		{"servers[0].stdio.env", "LD_PRELOAD"},
		{"servers[0].stdio.env", "NODE_OPTIONS"},
		{"servers[1].stdio.command", "bridge.allowed_commands"},
		{"servers[1].stdio.env", "PATH"},
		{"servers[2].http.url", "bridge.allow_private_networks"},
	}
	tests := []struct {
		name  string
		specs []*bridgev1.ServerSpec
		code  codes.Code
		want  []violation
	}{
		{"X-D9 the configuration's rules alone: PermissionDenied, every problem listed", []*bridgev1.ServerSpec{steered, intruder, lan}, codes.PermissionDenied, denied},
		{"X-D9 with an invalid declaration: InvalidArgument, every problem listed", []*bridgev1.ServerSpec{steered, intruder, lan, slow}, codes.InvalidArgument,
			append([]violation{{"servers[3].read_timeout", "positive"}}, denied...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := f.openErr(t, tc.specs...)
			st := wantCode(t, err, tc.code)
			wantViolations(t, st, tc.want)
			for _, w := range tc.want {
				if !strings.Contains(st.Message(), w.Has) {
					t.Errorf("message %q does not name %s", st.Message(), w.Has)
				}
			}
			for _, secret := range []string{"sk-env", "secret-path", "tok-secret"} {
				if strings.Contains(fmt.Sprint(st.Proto()), secret) {
					t.Errorf("status carries %q: %v", secret, st.Proto())
				}
			}
		})
	}
	if n := f.svc.Sessions(); n != 0 {
		t.Errorf("Sessions() = %d after refused opens", n)
	}
}

// TestListTools: R-T1, R-D8. Tools are listed per server in declaration
// order, in the server's own order, filtered by allowed_tools.
func TestListTools(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	zeta := refSpec("zeta", "tools")
	zeta.AllowedTools = []string{"no_schema", "echo", "add", "not_offered"}
	mid := refSpec("mid", "tools")
	mid.AllowedTools = []string{"not_offered"}
	id, _ := open(t, t.Context(), f.client, zeta, refSpec("alpha", "demo"), mid)

	names := func(res *bridgev1.ListToolsResponse) map[string][]string {
		out := make(map[string][]string)
		for _, s := range res.GetServers() {
			out[s.GetServerName()] = []string{}
			for _, tool := range s.GetTools() {
				out[s.GetServerName()] = append(out[s.GetServerName()], tool.GetName())
			}
		}
		return out
	}
	order := func(res *bridgev1.ListToolsResponse) []string {
		var out []string
		for _, s := range res.GetServers() {
			out = append(out, s.GetServerName())
		}
		return out
	}

	res, err := f.client.ListTools(t.Context(), &bridgev1.ListToolsRequest{SessionId: id})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if diff := cmp.Diff([]string{"zeta", "alpha", "mid"}, order(res)); diff != "" {
		t.Errorf("R-T1 server order (-want +got):\n%s", diff)
	}
	want := map[string][]string{
		"zeta":  {"add", "echo", "no_schema"}, // R-D8, in the server's order
		"alpha": {"add", "echo", "fail"},      // R-D8 no allowed_tools: all
		"mid":   {},                           // R-D8 nothing allowed is offered
	}
	if diff := cmp.Diff(want, names(res)); diff != "" {
		t.Errorf("R-D8 tools (-want +got):\n%s", diff)
	}

	tools := res.GetServers()[0].GetTools()
	wantTools := []*bridgev1.Tool{
		nil, // add: its generated schema is checked below
		{
			Name: "echo", Description: "Returns the text.",
			Annotations: &bridgev1.ToolAnnotations{Title: "Echo", ReadOnlyHint: true, DestructiveHint: true},
		},
		{Name: "no_schema", Description: "Has no input schema.", InputSchema: mustStruct(t, map[string]any{"type": "object", "properties": map[string]any{}})},
	}
	if diff := cmp.Diff(wantTools[2], tools[2], protocmp.Transform()); diff != "" {
		t.Errorf("R-T1 a missing schema becomes an empty object schema (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantTools[1], tools[1], protocmp.Transform(), protocmp.IgnoreFields(&bridgev1.Tool{}, "input_schema")); diff != "" {
		t.Errorf("echo (-want +got):\n%s", diff)
	}
	add := tools[0].GetInputSchema().AsMap()
	if add["type"] != "object" || add["properties"].(map[string]any)["a"] == nil {
		t.Errorf("add's input schema = %v, want an object schema with property a", add)
	}

	// Named servers come back in session order too.
	res, err = f.client.ListTools(t.Context(), &bridgev1.ListToolsRequest{SessionId: id, ServerNames: []string{"mid", "zeta"}})
	if err != nil {
		t.Fatalf("ListTools(mid, zeta): %v", err)
	}
	if diff := cmp.Diff([]string{"zeta", "mid"}, order(res)); diff != "" {
		t.Errorf("R-T1 named servers order (-want +got):\n%s", diff)
	}

	_, err = f.client.ListTools(t.Context(), &bridgev1.ListToolsRequest{SessionId: id, ServerNames: []string{"nope"}})
	wantCode(t, err, codes.NotFound)
	_, err = f.client.ListTools(t.Context(), &bridgev1.ListToolsRequest{SessionId: "nope"})
	wantCode(t, err, codes.NotFound)
}

// TestCallTool: R-T4, X-T5. What a tool returns reaches the model
// flattened; a tool's failure is data, not an RPC error.
func TestCallTool(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, _ := open(t, t.Context(), f.client, refSpec("t", "tools"))
	errOut := func(msg string) *bridgev1.CallToolResponse {
		return &bridgev1.CallToolResponse{Output: toolerror.JSON(msg), IsError: true}
	}
	tests := []struct {
		name, tool, args string
		want             *bridgev1.CallToolResponse
	}{
		{"R-T4 text", "echo", `{"text":"hi"}`, &bridgev1.CallToolResponse{Output: "hi"}},
		{"R-T4 empty arguments mean {}", "raw_args", "", &bridgev1.CallToolResponse{Output: "{}"}},
		{"R-T4 text blocks joined", "two_texts", "{}", &bridgev1.CallToolResponse{Output: "one\ntwo"}},
		{"R-T4 structured content as JSON", "add", `{"a":1,"b":2}`, &bridgev1.CallToolResponse{Output: `{"sum":3}`}},
		{"R-T4 isError", "fail", `{"text":"boom <&>"}`, &bridgev1.CallToolResponse{Output: `{"error":"boom <&>"}`, IsError: true}},
		{"R-T4 JSON-RPC error", "rpc_error", `{"text":"bad request"}`, errOut("bad request")},
		{"R-T4 JSON-RPC error without a message", "rpc_error", `{}`, errOut("The MCP server returned an empty error.")},
		{"R-T4 unknown tool", "nope", "{}", errOut(`unknown tool "nope"`)},
		{"R-T4 invalid JSON arguments", "echo", `{"text":`, errOut("the arguments are not a JSON object")},
		{"R-T4 arguments not an object", "echo", `["hi"]`, errOut("the arguments are not a JSON object")},
		{"R-T4 null arguments", "echo", `null`, errOut("the arguments are not a JSON object")},
		{"X-T5 non-text content kept", "media", "{}", &bridgev1.CallToolResponse{Output: "see attachments", Attachments: []*bridgev1.Content{
			{Kind: bridgev1.ContentKind_CONTENT_KIND_IMAGE, MimeType: "image/png", Source: &bridgev1.Content_Data{Data: []byte("png-bytes")}},
			{Kind: bridgev1.ContentKind_CONTENT_KIND_AUDIO, MimeType: "audio/wav", Source: &bridgev1.Content_Data{Data: []byte("wav-bytes")}},
			{Kind: bridgev1.ContentKind_CONTENT_KIND_RESOURCE_LINK, MimeType: "text/plain", Name: "report.txt", Source: &bridgev1.Content_Uri{Uri: "file:///tmp/report.txt"}},
			{Kind: bridgev1.ContentKind_CONTENT_KIND_RESOURCE, MimeType: "text/plain", Name: "mem://note", Source: &bridgev1.Content_Data{Data: []byte("a note")}},
		}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := call(t, f.client, id, "t", tc.tool, tc.args)
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("CallTool(%s, %s) (-want +got):\n%s", tc.tool, tc.args, diff)
			}
		})
	}
	t.Run("R-T3 unknown server", func(t *testing.T) {
		t.Parallel()
		_, err := f.client.CallTool(t.Context(), &bridgev1.CallToolRequest{SessionId: id, ServerName: "nope", ToolName: "echo"})
		st := wantCode(t, err, codes.NotFound)
		if !strings.Contains(st.Message(), `"nope"`) {
			t.Errorf("message %q does not name the server", st.Message())
		}
	})
	t.Run("unknown session", func(t *testing.T) {
		t.Parallel()
		_, err := f.client.CallTool(t.Context(), &bridgev1.CallToolRequest{SessionId: "nope", ServerName: "t", ToolName: "echo"})
		wantCode(t, err, codes.NotFound)
	})
}

// TestLazyConnect: R-L3 (without a cache: no process before first use).
// Opening a session starts nothing; a server starts when its tools are
// listed or called, once per session; bad arguments start nothing.
func TestLazyConnect(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dir := t.TempDir()
	pidFiles := map[string]string{}
	var specs []*bridgev1.ServerSpec
	for _, name := range []string{"a", "b", "c"} {
		pidFiles[name] = filepath.Join(dir, name)
		specs = append(specs, commandSpec(t, name, mcptest.Tools, map[string]string{mcptest.PidFileEnv: pidFiles[name]}))
	}
	started := func() map[string]int {
		out := map[string]int{}
		for name, path := range pidFiles {
			out[name] = len(mcptest.Pids(t, path))
		}
		return out
	}
	check := func(step string, want map[string]int) {
		t.Helper()
		if diff := cmp.Diff(want, started()); diff != "" {
			t.Errorf("%s: processes started per server (-want +got):\n%s", step, diff)
		}
	}

	id, _ := open(t, t.Context(), f.client, specs...)
	check("after OpenSession", map[string]int{"a": 0, "b": 0, "c": 0})

	if _, err := f.client.ListTools(t.Context(), &bridgev1.ListToolsRequest{SessionId: id, ServerNames: []string{"a"}}); err != nil {
		t.Fatalf("ListTools(a): %v", err)
	}
	check("after ListTools(a)", map[string]int{"a": 1, "b": 0, "c": 0})

	if res := call(t, f.client, id, "c", "echo", "not json"); !res.GetIsError() {
		t.Errorf("CallTool with bad arguments = %v, want is_error", res)
	}
	check("after a CallTool with bad arguments", map[string]int{"a": 1, "b": 0, "c": 0})

	call(t, f.client, id, "b", "echo", `{"text":"x"}`)
	call(t, f.client, id, "b", "echo", `{"text":"y"}`)
	check("after two CallTool(b)", map[string]int{"a": 1, "b": 1, "c": 0})

	if _, err := f.client.ListTools(t.Context(), &bridgev1.ListToolsRequest{SessionId: id}); err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	check("after ListTools of all", map[string]int{"a": 1, "b": 1, "c": 1})

	if _, err := f.client.CloseSession(t.Context(), &bridgev1.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
	for name, path := range pidFiles {
		for _, pid := range mcptest.Pids(t, path) {
			if !mcptest.Gone(pid) {
				t.Errorf("R-L4 %s's process %d runs after CloseSession", name, pid)
			}
		}
	}
}

// TestCallerVanishes: X-L5, X-L7. A caller that cancels its stream or
// drops its connection leaves no session and no process behind, not even a
// stubborn server's grandchild.
func TestCallerVanishes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		vanish func(cancel context.CancelFunc, closeConn func())
	}{
		{"X-L5 stream cancelled", func(cancel context.CancelFunc, _ func()) { cancel() }},
		{"X-L5 connection dropped", func(_ context.CancelFunc, closeConn func()) { closeConn() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			conn := f.dial(t)
			client := bridgev1.NewBridgeServiceClient(conn)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			id, _ := open(t, ctx, client, refSpec("t", "tools"), commandSpec(t, "s", mcptest.Stubborn, nil))
			pids := []int{
				callPid(t, client, id, "t", "pid"),
				callPid(t, client, id, "s", "pid"),
				callPid(t, client, id, "s", "grandchild"),
			}
			t.Cleanup(func() {
				if t.Failed() {
					for _, pid := range pids {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			if n := f.svc.Sessions(); n != 1 {
				t.Fatalf("Sessions() = %d, want 1", n)
			}

			tc.vanish(cancel, func() { _ = conn.Close() })
			waitSessions(t, f.svc, 0)
			for _, pid := range pids {
				mcptest.WaitGone(t, pid)
			}
		})
	}
}

// TestCloseSession: R-L4. CloseSession stops every process of the session
// before it returns, ends the stream, and is idempotent.
func TestCloseSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, stream := open(t, t.Context(), f.client, refSpec("t", "tools"), refSpec("d", "demo"))
	pid := callPid(t, f.client, id, "t", "pid")
	call(t, f.client, id, "d", "echo", `{"text":"started"}`)

	for i := range 2 {
		if _, err := f.client.CloseSession(t.Context(), &bridgev1.CloseSessionRequest{SessionId: id}); err != nil {
			t.Fatalf("CloseSession #%d: %v", i+1, err)
		}
		if !mcptest.Gone(pid) {
			t.Errorf("process %d runs after CloseSession #%d returned", pid, i+1)
		}
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("stream after CloseSession: %v, want EOF", err)
	}
	if _, err := f.client.CloseSession(t.Context(), &bridgev1.CloseSessionRequest{SessionId: "unknown"}); err != nil {
		t.Errorf("CloseSession of an unknown session: %v", err)
	}
	_, err := f.client.CallTool(t.Context(), &bridgev1.CallToolRequest{SessionId: id, ServerName: "t", ToolName: "pid"})
	wantCode(t, err, codes.NotFound)
	if n := f.svc.Sessions(); n != 0 {
		t.Errorf("Sessions() = %d after CloseSession", n)
	}
}

// TestCallToolTimeout: R-L1 through the service. A missed read_timeout is
// DeadlineExceeded naming the server and the request; the process is
// killed and the next call starts a fresh one. X-H6: the processes are
// warm spares, whose start and handshake start_timeout bounds, so the
// short read_timeout the hanging call needs bounds no handshake (on a busy
// machine a handshake under it failed the test).
func TestCallToolTimeout(t *testing.T) {
	t.Parallel()
	f, spec := slowFixture(t)
	id, _ := open(t, t.Context(), f.client, spec)
	first := callPid(t, f.client, id, "slow", "pid")

	_, err := f.client.CallTool(t.Context(), &bridgev1.CallToolRequest{SessionId: id, ServerName: "slow", ToolName: "hang"})
	st := wantCode(t, err, codes.DeadlineExceeded)
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	wantInfo := &errdetails.ErrorInfo{Reason: "MCP_TIMEOUT", Domain: "agentd", Metadata: map[string]string{
		"server": "slow", "request": `tools/call for "hang"`, "read_timeout": shortTimeout.String(),
	}}
	if diff := cmp.Diff(wantInfo, info, protocmp.Transform()); diff != "" {
		t.Errorf("ErrorInfo (-want +got):\n%s", diff)
	}
	if !strings.Contains(st.Message(), `"slow"`) || !strings.Contains(st.Message(), "hang") {
		t.Errorf("message %q does not name the server and the request", st.Message())
	}
	mcptest.WaitGone(t, first)

	waitSpare(t, f, "slow")
	if next := callPid(t, f.client, id, "slow", "pid"); next == first {
		t.Errorf("the call after the timeout reused pid %d", first)
	}
}

// TestServerStopsMidCall: X-L8. A stdio server that stops during a call
// (it crashes, or is killed) is no failed RPC: the model gets an error
// result saying so, the session goes on, and the server's next call runs
// on a fresh process. A server that stops before it has served (during
// the handshake) still fails the call: Unavailable, naming it.
func TestServerStopsMidCall(t *testing.T) {
	t.Parallel()
	stopped := &bridgev1.CallToolResponse{IsError: true, Output: `{"error":"the MCP server \"files\" stopped during the call; it may or may not have run"}`}
	tests := []struct {
		name string
		tool string
		// kill, if set, kills the process once the call runs.
		kill bool
	}{
		{"X-L8 the server crashes mid-call", "crash", false},
		{"X-L8 the server is killed mid-call", "stall", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// stall pings agentd as soon as it runs, and says so on stderr
			// once agentd answered: the call is then in flight.
			logger, running := mcptest.WatchStderr("mcptest: ping answered")
			f := newFixtureOptions(t, nil, func(o *Options) { o.Logger = logger })
			id, _ := open(t, t.Context(), f.client, refSpec("files", "tools"))
			first := callPid(t, f.client, id, "files", "pid")
			if tc.kill {
				go func() {
					select {
					case <-running:
						_ = syscall.Kill(first, syscall.SIGKILL)
					case <-t.Context().Done():
					}
				}()
			}
			got := call(t, f.client, id, "files", tc.tool, "")
			if diff := cmp.Diff(stopped, got, protocmp.Transform()); diff != "" {
				t.Errorf("X-L8 result of a call whose server stopped (-want +got):\n%s", diff)
			}
			if !mcptest.Gone(first) {
				t.Errorf("the stopped server's process %d still runs", first)
			}
			if second := callPid(t, f.client, id, "files", "pid"); second == first {
				t.Errorf("X-L8 the next call ran on the stopped process %d", first)
			}
			pools, err := f.svc.Admin().GetPoolStats(t.Context(), &bridgev1.GetPoolStatsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pools.GetPools() {
				if p.GetServerName() == "tools" && p.GetCrashed() != 1 {
					t.Errorf("pool stats %v; want the stopped process counted as crashed", p)
				}
			}
		})
	}
	t.Run("X-L8 a shared server's other sessions go on on a fresh process", func(t *testing.T) {
		t.Parallel()
		f := newFixtureWith(t, registeredTools(t, map[string]config.Shared{"shared": config.SharedPerTenant}))
		a, _ := open(t, t.Context(), f.client, refSpec("files", "shared"))
		b, _ := open(t, t.Context(), f.client, refSpec("files", "shared"))
		first := callPid(t, f.client, a, "files", "pid")
		if pb := callPid(t, f.client, b, "files", "pid"); pb != first {
			t.Fatalf("a shared server ran two processes: %d and %d", first, pb)
		}
		if diff := cmp.Diff(stopped, call(t, f.client, a, "files", "crash", ""), protocmp.Transform()); diff != "" {
			t.Errorf("X-L8 result of the crash (-want +got):\n%s", diff)
		}
		// b still holds the dead process; its next call must not go to it.
		sess, err := f.svc.session(b)
		if err != nil {
			t.Fatal(err)
		}
		srv := sess.byName["files"]
		srv.mu.Lock()
		held := srv.conn
		srv.mu.Unlock()
		testwait.Recv(t, held.Exited(), "the crashed process to be reaped")
		if second := callPid(t, f.client, b, "files", "pid"); second == first {
			t.Errorf("X-L8 the other session's next call ran on the crashed process %d", first)
		}
	})
	t.Run("X-L8 a server that stops during the handshake fails the call", func(t *testing.T) {
		t.Parallel()
		f := newFixtureWith(t, func(c *config.Bridge) {
			c.Servers["files"] = config.Server{Command: "/bin/false"}
		})
		id, _ := open(t, t.Context(), f.client, refSpec("files", "files"))
		_, err := f.client.CallTool(t.Context(), &bridgev1.CallToolRequest{SessionId: id, ServerName: "files", ToolName: "echo"})
		st := wantCode(t, err, codes.Unavailable)
		if !strings.Contains(st.Message(), `"files"`) || !strings.Contains(st.Message(), "handshake") {
			t.Errorf("X-L8 %q does not name the server and the handshake", st.Message())
		}
	})
}

// TestToolsChanged: a server's notifications/tools/list_changed reaches
// the OpenSession stream (the notification path of X-C6).
func TestToolsChanged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, stream := open(t, t.Context(), f.client, refSpec("t", "tools"))
	call(t, f.client, id, "t", "add_tool", "{}")
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	want := &bridgev1.OpenSessionResponse{Event: &bridgev1.OpenSessionResponse_ToolsChanged{ToolsChanged: &bridgev1.ToolsChanged{ServerName: "t"}}}
	if diff := cmp.Diff(want, resp, protocmp.Transform()); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
	if res := call(t, f.client, id, "t", "added", "{}"); res.GetOutput() != "added" {
		t.Errorf("the added tool = %v", res)
	}
}

// TestServiceClose: R-L4, X-L7. Close stops every session and its
// processes, and refuses new sessions.
func TestServiceClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var pids []int
	var streams []interface {
		Recv() (*bridgev1.OpenSessionResponse, error)
	}
	for range 2 {
		id, stream := open(t, t.Context(), f.client, refSpec("t", "tools"))
		pids = append(pids, callPid(t, f.client, id, "t", "pid"))
		streams = append(streams, stream)
	}
	f.svc.Close()
	for _, pid := range pids {
		if !mcptest.Gone(pid) {
			t.Errorf("process %d runs after Close returned", pid)
		}
	}
	for i, stream := range streams {
		if _, err := stream.Recv(); err != io.EOF {
			t.Errorf("stream %d after Close: %v, want EOF", i, err)
		}
	}
	waitSessions(t, f.svc, 0)

	err := f.openErr(t, refSpec("t", "tools"))
	wantCode(t, err, codes.Unavailable)
	f.svc.Close() // idempotent
}

// violation is a field violation a refusal must carry: its field, and
// words its description has.
type violation struct{ Field, Has string }

// wantViolations checks that st's google.rpc.BadRequest lists exactly the
// violations want, in order.
func wantViolations(t *testing.T, st *status.Status, want []violation) {
	t.Helper()
	var got []violation
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				got = append(got, violation{v.GetField(), v.GetDescription()})
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("violations = %v, want %v", got, want)
	}
	for i, w := range want {
		if got[i].Field != w.Field || !strings.Contains(got[i].Has, w.Has) {
			t.Errorf("violation %d = %v, want field %s saying %q", i, got[i], w.Field, w.Has)
		}
	}
}

// X-M1: a url server registered under bridge.servers is agentd's to
// resolve (it is its OAuth client); a ref to one that reaches the bridge
// (from an agentd whose configuration lacks it) is refused, naming the
// setting and not the URL, and such a registration has no pool.
func TestOpenSessionRefToURLServer(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(b *config.Bridge) {
		b.Servers["crm"] = config.Server{URL: "https://crm.example/secret-path/mcp", OAuth: &config.ServerOAuth{}}
	})
	err := f.openErr(t, &bridgev1.ServerSpec{Name: "crm", ReadTimeout: durationpb.New(roomyTimeout), Transport: &bridgev1.ServerSpec_Ref{Ref: "crm"}})
	st := wantCode(t, err, codes.InvalidArgument)
	wantViolations(t, st, []violation{{"servers[0].ref", "agentd serve resolves"}})
	if strings.Contains(st.Message(), "secret-path") {
		t.Errorf("message %q shows the URL's path", st.Message())
	}
}
