package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"
	errdetails "google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/httpapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeAgent answers Preview with err, or with the request's provider.
type fakeAgent struct {
	agentdv1.UnimplementedAgentServiceServer
	err error
}

func (f fakeAgent) Preview(_ context.Context, req *agentdv1.PreviewRequest) (*agentdv1.PreviewResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &agentdv1.PreviewResponse{Provider: req.GetAgent().GetProvider()}, nil
}

// serve serves agent (with health beside it) through New with cors, over
// HTTP/1.1 and h2c.
func serve(t *testing.T, agent agentdv1.AgentServiceServer, cors config.CORS) string {
	t.Helper()
	srv := grpc.NewServer(grpc.UnaryInterceptor(httpapi.UnaryRetryAfter))
	agentdv1.RegisterAgentServiceServer(srv, agent)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	h, err := httpapi.New(srv, httpapi.Options{CORS: cors})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetHTTP1(true)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		srv.Stop()
	})
	return ts.URL
}

// do sends method path with body of contentType (none when empty) and
// returns the answer and its body.
func do(t *testing.T, method, url, contentType string, body io.Reader, hdr http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// jsonError is an HTTP/JSON error's body.
type jsonError struct {
	Code    codes.Code `json:"code"`
	Message string     `json:"message"`
}

func readError(t *testing.T, body string) jsonError {
	t.Helper()
	var e jsonError
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not a JSON error: %q: %v", body, err)
	}
	return e
}

func retryable(code codes.Code, after time.Duration) error {
	st, err := status.New(code, "later").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(after)})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// HTTP/JSON answers each error with the status users expect and a
// JSON body saying what is wrong, whether the call failed or never
// began; a status that says when to retry gives Retry-After, in whole
// seconds rounded up.
func TestErrors(t *testing.T) {
	t.Parallel()
	big := `{"messages":[{"parts":[{"text":"` + strings.Repeat("a", httpapi.MaxBodyBytes) + `"}]}]}`
	for _, tc := range []struct {
		name        string
		err         error // Preview's
		method      string
		path        string
		contentType string
		body        string
		chunked     bool
		want        int
		code        codes.Code
		says        string
		retryAfter  string
	}{
		{name: "a tenant over its limit", err: retryable(codes.ResourceExhausted, 1500*time.Millisecond), want: http.StatusTooManyRequests, code: codes.ResourceExhausted, says: "later", retryAfter: "2"},
		{name: "unavailable", err: retryable(codes.Unavailable, time.Second), want: http.StatusServiceUnavailable, code: codes.Unavailable, says: "later", retryAfter: "1"},
		{name: "unauthenticated", err: status.Error(codes.Unauthenticated, "who"), want: http.StatusUnauthorized, code: codes.Unauthenticated, says: "who"},
		{name: "malformed JSON", body: `{"agent":`, want: http.StatusBadRequest, code: codes.InvalidArgument, says: "unexpected EOF"},
		{name: "an unknown field", body: `{"agnt":{}}`, want: http.StatusBadRequest, code: codes.InvalidArgument, says: `unknown field "agnt"`},
		{name: "a body over the limit", body: big, want: http.StatusRequestEntityTooLarge, code: codes.ResourceExhausted, says: "larger than"},
		{name: "a body over the limit, chunked", body: big, chunked: true, want: http.StatusRequestEntityTooLarge, code: codes.ResourceExhausted, says: "larger than"},
		{name: "a wrong content type", contentType: "text/plain", want: http.StatusUnsupportedMediaType, code: codes.InvalidArgument, says: `content type "text/plain"`},
		{name: "an unknown route", method: http.MethodGet, path: "/v1/nothing", want: http.StatusNotFound, code: codes.NotFound, says: "no route for GET /v1/nothing"},
		{name: "a method the route does not take", method: http.MethodDelete, want: http.StatusMethodNotAllowed, code: codes.Unimplemented},
		{name: "a good call", want: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := serve(t, fakeAgent{err: tc.err}, config.CORS{})
			method, path, ct, body := tc.method, tc.path, tc.contentType, tc.body
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = "/v1/preview"
			}
			if ct == "" && method == http.MethodPost {
				ct = "application/json"
			}
			if body == "" {
				body = `{"agent":{"provider":"mock"}}`
			}
			var r io.Reader = strings.NewReader(body)
			if tc.chunked {
				r = io.MultiReader(r) // no length: sent chunked
			}
			res, got := do(t, method, url+path, ct, r, nil)
			if res.StatusCode != tc.want || res.Header.Get("Retry-After") != tc.retryAfter {
				t.Fatalf("%d with Retry-After %q: %s; want %d with %q", res.StatusCode, res.Header.Get("Retry-After"), got, tc.want, tc.retryAfter)
			}
			if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
				t.Errorf("Content-Type %q; want JSON", res.Header.Get("Content-Type"))
			}
			if tc.want == http.StatusOK {
				if !strings.Contains(got, `"provider":"mock"`) && !strings.Contains(got, `"provider": "mock"`) {
					t.Errorf("answer %s", got)
				}
				return
			}
			if e := readError(t, got); e.Code != tc.code || !strings.Contains(e.Message, tc.says) {
				t.Errorf("error %+v; want %v saying %q", e, tc.code, tc.says)
			}
		})
	}
}

// Connect, like HTTP/JSON, reads JSON strictly, and carries
// Retry-After.
func TestConnectErrors(t *testing.T) {
	t.Parallel()
	url := serve(t, fakeAgent{}, config.CORS{})
	res, got := do(t, http.MethodPost, url+agentdv1.AgentService_Preview_FullMethodName, "application/json",
		strings.NewReader(`{"agnt":{}}`), http.Header{"Connect-Protocol-Version": {"1"}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(got, `unknown field \"agnt\"`) {
		t.Errorf("Connect with an unknown field: %d %s; want 400 naming it", res.StatusCode, got)
	}
	url = serve(t, fakeAgent{err: retryable(codes.ResourceExhausted, 3*time.Second)}, config.CORS{})
	client := connect.NewClient[agentdv1.PreviewRequest, agentdv1.PreviewResponse](http.DefaultClient, url+agentdv1.AgentService_Preview_FullMethodName)
	_, err := client.CallUnary(t.Context(), connect.NewRequest(&agentdv1.PreviewRequest{}))
	if cerr := new(connect.Error); !errors.As(err, &cerr) || cerr.Code() != connect.CodeResourceExhausted || cerr.Meta().Get("Retry-After") != "3" {
		t.Errorf("Connect over a limit: %v; want ResourceExhausted with Retry-After 3", err)
	}
}

// gRPC requests reach every service of the gRPC server through the
// handler; Connect, gRPC-Web and HTTP/JSON reach only the public ones.
func TestPublicServicesOnly(t *testing.T) {
	t.Parallel()
	url := serve(t, fakeAgent{}, config.CORS{})
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	defer h2c.CloseIdleConnections()
	check := func(opts ...connect.ClientOption) error {
		client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](h2c, url+healthpb.Health_Check_FullMethodName, opts...)
		_, err := client.CallUnary(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
		return err
	}
	if err := check(connect.WithGRPC()); err != nil {
		t.Errorf("health over gRPC: %v", err)
	}
	if err := check(); connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("health over Connect: %v; want not found", err)
	}
	if err := check(connect.WithGRPCWeb()); connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("health over gRPC-Web: %v; want not found", err)
	}
}

// The OpenAPI document is served without a credential.
func TestOpenAPI(t *testing.T) {
	t.Parallel()
	url := serve(t, fakeAgent{}, config.CORS{})
	res, got := do(t, http.MethodGet, url+"/openapi.json", "", nil, nil)
	var doc struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal([]byte(got), &doc); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("%d %v", res.StatusCode, err)
	}
	for _, path := range []string{"/v1/preview", "/v1/generations", "/v1/generations/{generation_id}", "/v1/tokens:revoke"} {
		if _, ok := doc.Paths[path]; !ok || !strings.HasPrefix(doc.OpenAPI, "3.") {
			t.Errorf("OpenAPI %s has no %s", doc.OpenAPI, path)
		}
	}
}

// CORS answers the preflights of the configured origins only, with
// Connect's, gRPC-Web's and agentd's headers, never allowing
// credentials; without origins, no CORS header at all.
func TestCORS(t *testing.T) {
	t.Parallel()
	const app = "https://app.example.com"
	url := serve(t, fakeAgent{}, config.CORS{AllowedOrigins: []string{app}})
	preflight := func(url, origin string) *http.Response {
		res, _ := do(t, http.MethodOptions, url+"/v1/preview", "", nil, http.Header{
			"Origin": {origin}, "Access-Control-Request-Method": {"POST"},
			// Sorted and lower case, as browsers send them.
			"Access-Control-Request-Headers": {"authorization,connect-protocol-version,content-type,last-event-id,traceparent,x-grpc-web"},
		})
		return res
	}
	res := preflight(url, app)
	h := res.Header
	if res.StatusCode >= 300 || h.Get("Access-Control-Allow-Origin") != app || h.Get("Access-Control-Allow-Credentials") != "" ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight of %s: %d %v", app, res.StatusCode, h)
	}
	allowed := strings.ToLower(h.Get("Access-Control-Allow-Headers"))
	for _, want := range []string{"authorization", "content-type", "connect-protocol-version", "traceparent", "last-event-id", "x-grpc-web"} {
		if !strings.Contains(allowed, want) {
			t.Errorf("preflight allows headers %q; want %s among them", allowed, want)
		}
	}
	if res := preflight(url, "https://evil.example.com"); res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin's preflight: %v", res.Header)
	}
	res, _ = do(t, http.MethodPost, url+"/v1/preview", "application/json", strings.NewReader(`{}`), http.Header{"Origin": {app}})
	exposed := strings.ToLower(res.Header.Get("Access-Control-Expose-Headers"))
	if res.Header.Get("Access-Control-Allow-Origin") != app || !strings.Contains(exposed, "grpc-status") || !strings.Contains(exposed, "retry-after") ||
		res.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("a call from %s: %v", app, res.Header)
	}
	none := serve(t, fakeAgent{}, config.CORS{})
	if res := preflight(none, app); res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("without origins, a preflight: %v", res.Header)
	}
	any := serve(t, fakeAgent{}, config.CORS{AllowedOrigins: []string{"*"}})
	if res := preflight(any, app); res.Header.Get("Access-Control-Allow-Origin") != "*" || res.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf(`with "*", a preflight: %v`, res.Header)
	}
}
