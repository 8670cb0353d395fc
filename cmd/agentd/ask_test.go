package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// fakeAgent is an AgentService whose Generate sends one event and reports
// the client's answer to it (nil when the client half-closed instead).
type fakeAgent struct {
	agentdv1.UnimplementedAgentServiceServer
	event   *agentdv1.GenerateResponse
	answers chan *agentdv1.GenerateRequest
}

func (f *fakeAgent) Generate(s agentdv1.AgentService_GenerateServer) error {
	if _, err := s.Recv(); err != nil {
		return err
	}
	if err := s.Send(f.event); err != nil {
		return err
	}
	answer, err := s.Recv()
	if errors.Is(err, io.EOF) {
		f.answers <- nil
		return status.Error(codes.Unauthenticated, "nobody answered")
	}
	if err != nil {
		return err
	}
	f.answers <- answer
	return s.Send(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{}}})
}

// serveFake serves f on a loopback port until the test ends.
func serveFake(t *testing.T, f agentdv1.AgentServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	agentdv1.RegisterAgentServiceServer(s, f)
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return lis.Addr().String()
}

// watched is a writer that says when what was written contains want.
type watched struct {
	mu   sync.Mutex
	b    strings.Builder
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watched) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watched) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// freePort is a loopback address whose port is free now and below the
// kernel's ephemeral range (Linux's is 32768-60999): a listener that any
// test opens on port 0 meanwhile cannot be given it before the CLI binds
// it.
func freePort(t *testing.T) string {
	t.Helper()
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		lis.Close()
		return addr
	}
	t.Fatal("no free port in 20000-31999")
	return ""
}

func authURL(redirect, state string) string {
	q := url.Values{"response_type": {"code"}, "client_id": {"agentd"}, "redirect_uri": {redirect}, "state": {state}, "code_challenge": {"ch"}}
	return "https://auth.example/authorize?" + q.Encode()
}

func authEvent(authURL string) *agentdv1.GenerateResponse {
	return &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_AuthorizationRequest{AuthorizationRequest: &agentdv1.AuthorizationRequest{
		Id: "authz_1", ServerName: "tracker", Url: authURL, Scopes: []string{"issues:read", "issues:write"},
		Reason: agentdv1.AuthorizationReason_AUTHORIZATION_REASON_FIRST_USE,
	}}}
}

func authAnswer(redirect string) *agentdv1.GenerateRequest {
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_AuthorizationResponse{AuthorizationResponse: &agentdv1.AuthorizationResponse{
		RequestId: "authz_1", RedirectUrl: redirect,
	}}}
}

// X-M2 at the terminal: `agentd generate` prints an authorization request
// (server, why, scopes, URL) and answers it with the redirect URL the
// person pastes; an empty line asks again, and the end of the input
// answers nothing (the stream is half-closed, and the server decides).
func TestGenerateAuthorizationPasted(t *testing.T) {
	t.Parallel()
	u := authURL("https://app.example/oauth/callback", "st-1")
	pasted := "https://app.example/oauth/callback?code=c-1&state=st-1"
	for _, tc := range []struct {
		name    string
		stdin   string
		want    *agentdv1.GenerateRequest
		wantErr string
	}{
		{"X-M2 the pasted redirect", "\n" + pasted + "\n", authAnswer(pasted), ""},
		{"X-M2 the pasted redirect without a newline", pasted, authAnswer(pasted), ""},
		{"X-M2 the input ends", "", nil, "Unauthenticated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeAgent{event: authEvent(u), answers: make(chan *agentdv1.GenerateRequest, 1)}
			addr := serveFake(t, f)
			var out, errOut bytes.Buffer
			err := generate(t.Context(), []string{"--addr", addr, "--prompt", "hi"}, func(string) string { return "" }, strings.NewReader(tc.stdin), &out, &errOut)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("generate: %v; want error %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, <-f.answers, protocmp.Transform()); diff != "" {
				t.Errorf("the answer (-want +got):\n%s", diff)
			}
			for _, want := range []string{"authorization requested by server tracker (first use), scopes: issues:read issues:write", u} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the output does not say %q:\n%s", want, out.String())
				}
			}
			if strings.Contains(errOut.String(), "listening") {
				t.Errorf("listening for a redirect that is not on loopback:\n%s", errOut.String())
			}
		})
	}
}

// X-M2 at the terminal: when the authorization's redirect_uri is a
// loopback http URL, `agentd generate` listens there and answers with the
// browser's redirect: only a request to the redirect path carrying the
// authorization's state counts, the browser gets a page saying it may be
// closed, and the port is free again afterwards.
func TestGenerateAuthorizationCaught(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	redirect := "http://" + port + "/oauth/callback"
	f := &fakeAgent{event: authEvent(authURL(redirect, "st-2")), answers: make(chan *agentdv1.GenerateRequest, 1)}
	addr := serveFake(t, f)
	stdin, typing := io.Pipe() // the person types nothing
	defer typing.Close()
	errOut := &watched{want: "listening at " + port, seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		done <- generate(t.Context(), []string{"--addr", addr, "--prompt", "hi"}, func(string) string { return "" }, stdin, io.Discard, errOut)
	}()
	select {
	case <-errOut.seen:
	case err := <-done:
		t.Fatalf("generate ended before listening: %v\n%s", err, errOut.String())
	}

	browse := func(u string) (int, string) {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, other := range []string{redirect + "?code=c-x&state=st-other", "http://" + port + "/favicon.ico", redirect + "?state=st-2"} {
		if code, _ := browse(other); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", other, code)
		}
	}
	caught := redirect + "?code=c-2&state=st-2"
	if code, page := browse(caught); code != http.StatusOK || !strings.Contains(page, "You may close this page") {
		t.Errorf("GET the redirect: %d %q", code, page)
	}
	if err := <-done; err != nil {
		t.Fatalf("generate: %v\n%s", err, errOut.String())
	}
	if diff := cmp.Diff(authAnswer(caught), <-f.answers, protocmp.Transform()); diff != "" {
		t.Errorf("the answer (-want +got):\n%s", diff)
	}
	lis, err := net.Listen("tcp", port)
	if err != nil {
		t.Fatalf("the redirect's port is still taken: %v", err)
	}
	lis.Close()
}

// X-M2 at the terminal: with a loopback redirect_uri, a pasted redirect
// still answers (and the port is let go); a port already taken falls back
// to pasting.
func TestGenerateAuthorizationLoopbackPasted(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() }) // after the parallel subtests
	for _, tc := range []struct {
		name, port, wantSaid string
	}{
		{"X-M2 pasted while listening", freePort(t), "listening at"},
		{"X-M2 the redirect's port is taken", taken.Addr().String(), "cannot catch the redirect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			redirect := "http://" + tc.port + "/cb"
			f := &fakeAgent{event: authEvent(authURL(redirect, "st-3")), answers: make(chan *agentdv1.GenerateRequest, 1)}
			addr := serveFake(t, f)
			pasted := redirect + "?code=c-3&state=st-3"
			var errOut bytes.Buffer
			if err := generate(t.Context(), []string{"--addr", addr, "--prompt", "hi"}, func(string) string { return "" }, strings.NewReader(pasted+"\n"), io.Discard, &errOut); err != nil {
				t.Fatalf("generate: %v\n%s", err, errOut.String())
			}
			if diff := cmp.Diff(authAnswer(pasted), <-f.answers, protocmp.Transform()); diff != "" {
				t.Errorf("the answer (-want +got):\n%s", diff)
			}
			if !strings.Contains(errOut.String(), tc.wantSaid) {
				t.Errorf("the prompt does not say %q:\n%s", tc.wantSaid, errOut.String())
			}
			if tc.port != taken.Addr().String() {
				lis, err := net.Listen("tcp", tc.port)
				if err != nil {
					t.Fatalf("the redirect's port is still taken: %v", err)
				}
				lis.Close()
			}
		})
	}
}

// The redirect target `agentd generate` catches itself: an http URL with a
// port on 127.0.0.1, localhost or [::1].
func TestLoopbackRedirect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		redirect string
		want     bool
	}{
		{"http://127.0.0.1:8976/oauth/callback", true},
		{"http://localhost:3000/callback", true},
		{"http://[::1]:9000/", true},
		{"http://127.0.0.1/oauth/callback", false},
		{"https://127.0.0.1:8976/oauth/callback", false},
		{"http://app.example:8976/cb", false},
		{"http://127.0.0.2:8976/cb", false},
		{"", false},
	} {
		got, ok := loopbackRedirect(authURL(tc.redirect, "s"))
		if ok != tc.want || ok && got.String() != tc.redirect {
			t.Errorf("loopbackRedirect(redirect_uri %q) = %v, %v; want %v", tc.redirect, got, ok, tc.want)
		}
	}
	if _, ok := loopbackRedirect("https://auth.example/authorize"); ok {
		t.Error("an authorization URL without redirect_uri: caught")
	}
}

// `agentd generate` answers a server's request for input: a form with a
// JSON object (asking again after one that is not), a web page with
// Enter, either with decline or cancel.
func TestGenerateInput(t *testing.T) {
	t.Parallel()
	form := &agentdv1.InputRequest{Id: "in_1", ServerName: "tracker", Message: "Which project?", Mode: agentdv1.InputMode_INPUT_MODE_FORM,
		RequestedSchema: mustStruct(t, map[string]any{"type": "object", "properties": map[string]any{"project": map[string]any{"type": "string"}}})}
	page := &agentdv1.InputRequest{Id: "in_2", ServerName: "tracker", Message: "Sign the terms", Mode: agentdv1.InputMode_INPUT_MODE_URL, Url: "https://tracker.example/terms"}
	answer := func(id string, action agentdv1.InputAction, content *structpb.Struct) *agentdv1.GenerateRequest {
		return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_InputResponse{InputResponse: &agentdv1.InputResponse{RequestId: id, Action: action, Content: content}}}
	}
	for _, tc := range []struct {
		name  string
		req   *agentdv1.InputRequest
		stdin string
		want  *agentdv1.GenerateRequest
	}{
		{"a form", form, "not json\n{\"project\": \"agentd\"}\n", answer("in_1", agentdv1.InputAction_INPUT_ACTION_ACCEPT, mustStruct(t, map[string]any{"project": "agentd"}))},
		{"a form left empty", form, "\n", answer("in_1", agentdv1.InputAction_INPUT_ACTION_ACCEPT, &structpb.Struct{})},
		{"a form declined", form, "decline\n", answer("in_1", agentdv1.InputAction_INPUT_ACTION_DECLINE, nil)},
		{"a page", page, "\n", answer("in_2", agentdv1.InputAction_INPUT_ACTION_ACCEPT, nil)},
		{"a page cancelled", page, "Cancel\n", answer("in_2", agentdv1.InputAction_INPUT_ACTION_CANCEL, nil)},
		{"the input ends", page, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeAgent{event: &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_InputRequest{InputRequest: proto.Clone(tc.req).(*agentdv1.InputRequest)}},
				answers: make(chan *agentdv1.GenerateRequest, 1)}
			addr := serveFake(t, f)
			var out bytes.Buffer
			err := generate(t.Context(), []string{"--addr", addr, "--prompt", "hi"}, func(string) string { return "" }, strings.NewReader(tc.stdin), &out, io.Discard)
			if (err != nil) != (tc.want == nil) {
				t.Errorf("generate: %v", err)
			}
			if diff := cmp.Diff(tc.want, <-f.answers, protocmp.Transform()); diff != "" {
				t.Errorf("the answer (-want +got):\n%s", diff)
			}
			if !strings.Contains(out.String(), "input requested by server tracker: "+tc.req.GetMessage()) {
				t.Errorf("the output does not show the request:\n%s", out.String())
			}
		})
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
