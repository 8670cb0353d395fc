package server_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/server"
)

// A generation shows who started it, for whom, on which provider and
// model, and, traced, the trace id of its start, which its started event
// gives too; untraced, none.
func TestGenerationOrigin(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	opts := server.Options{Bridge: &fakeBridge{}, Checkpoints: st, Generations: st.Generations(), Replica: "r"}
	untraced := newClientWith(t, opts, recordingScript())
	opts.TracerProvider = sdktrace.NewTracerProvider()
	traced := newClientWith(t, opts, recordingScript())
	agent := textAgent(t, "hi")
	agent.Model = "script-1"
	hex := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for name, client := range map[string]agentdv1.AgentServiceClient{"traced": traced, "untraced": untraced} {
		events, s := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi"), EndUser: "u-7"}, nil)
		wantCode(t, s, codes.OK)
		started := started(t, events)
		g := mustGet(t, client, started.GetGenerationId())
		if g.GetEndUser() != "u-7" || g.GetProvider() != "script" || g.GetModel() != "script-1" || g.GetStartedBy() != "" {
			t.Errorf("%s: the generation's origin: %v; want end user u-7, script, script-1, started by nobody", name, g)
		}
		if tid := started.GetTraceId(); g.GetTraceId() != tid || hex.MatchString(tid) != (name == "traced") {
			t.Errorf("%s: trace ids %q (the record), %q (started); want the same, 32 hex digits when traced, else none", name, g.GetTraceId(), tid)
		}
	}
}

// GetCaller names the authenticated principal, its tenant and roles;
// without authentication, the anonymous caller with every role.
func TestGetCaller(t *testing.T) {
	t.Parallel()
	d := newDeciding(t, &fakeBridge{}, nil, recordingScript())
	for key, want := range map[string]*agentdv1.GetCallerResponse{
		alice: {Name: "alice", Tenant: "acme", Roles: []string{"generate"}},
		bob:   {Name: "bob", Tenant: "acme", Roles: []string{"approve"}},
	} {
		got, err := d.client.GetCaller(as(t, key), &agentdv1.GetCallerRequest{})
		if err != nil || got.GetName() != want.GetName() || got.GetTenant() != want.GetTenant() || !slices.Equal(got.GetRoles(), want.GetRoles()) {
			t.Errorf("GetCaller as %s: %v, %v; want %v", key, got, err, want)
		}
	}
	anon, err := newClient(t, &fakeBridge{}, recordingScript()).GetCaller(t.Context(), &agentdv1.GetCallerRequest{})
	want := []string{"generate", "approve", "observer", "admin", "tenant_admin"}
	if err != nil || anon.GetName() != "anonymous" || anon.GetTenant() != "" || !slices.Equal(anon.GetRoles(), want) {
		t.Errorf("GetCaller without authentication: %v, %v; want anonymous, every role", anon, err)
	}
}

// seedOrigins records generations a to e of the default tenant a minute
// apart from day, of the origins listed, c on a thread.
func seedOrigins(t *testing.T, st store.Store, day time.Time) {
	t.Helper()
	if _, err := st.Threads().CreateThread(t.Context(), store.NewThread{ID: "thr_1", Now: day}); err != nil {
		t.Fatal(err)
	}
	for i, o := range []store.Origin{
		{StartedBy: "alice", EndUser: "u1", Provider: "anthropic", Model: "claude"},
		{StartedBy: "alice", EndUser: "u2", Provider: "openai", Model: "gpt"},
		{StartedBy: "bob", EndUser: "u1", Provider: "anthropic", Model: "claude", TraceID: "0af7651916cd43dd8448eb211c80319c"},
		{EndUser: "u1", Provider: "anthropic", Model: "haiku"},
		{StartedBy: "bob", EndUser: "u2", Provider: "openai", Model: "gpt"},
	} {
		ng := store.NewGeneration{ID: "gen_" + string(rune('a'+i)), Owner: "elsewhere", Expires: day.Add(24 * time.Hour), Origin: o,
			Now: day.Add(time.Duration(i) * time.Minute)}
		if i == 2 {
			ng.Thread = &store.ThreadStart{ID: "thr_1"}
		}
		if _, err := st.Generations().Create(t.Context(), ng); err != nil {
			t.Fatal(err)
		}
	}
}

// ListGenerations' filters work over HTTP/JSON as query parameters, times
// in RFC 3339: each exact, the time range half-open, all at once; each
// generation with its origin. A page token used with other filters, or a
// time that is not one, is 400.
func TestListGenerationsFiltersOverHTTP(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	day := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	seedOrigins(t, st, day)
	svc := server.New(server.Options{Providers: registryOf(t, recordingScript()), Bridge: &fakeBridge{}, Config: config.Default().Generation,
		Checkpoints: st, Generations: st.Generations(), Threads: st.Threads(), Replica: "replica-a"})
	t.Cleanup(svc.Close)
	client := transcoded(t, svc)
	list := func(query string) (int, *agentdv1.ListGenerationsResponse) {
		t.Helper()
		code, body := httpCall(t, client, http.MethodGet, "/v1/generations?"+query, "")
		out := &agentdv1.ListGenerationsResponse{}
		if code == http.StatusOK {
			if err := protojson.Unmarshal([]byte(body), out); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
		}
		return code, out
	}
	at := func(m int) string {
		return url.QueryEscape(day.Add(time.Duration(m) * time.Minute).Format(time.RFC3339))
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"model=claude", []string{"gen_c", "gen_a"}},
		{"provider=openai", []string{"gen_e", "gen_b"}},
		{"end_user=u1&provider=anthropic", []string{"gen_d", "gen_c", "gen_a"}},
		{"thread_id=thr_1", []string{"gen_c"}},
		{"created_after=" + at(1) + "&created_before=" + at(3), []string{"gen_c", "gen_b"}},
		{"model=gpt&created_after=" + at(2), []string{"gen_e"}},
		{"model=claude&states=GENERATION_STATE_RUNNING&page_size=1", []string{"gen_c"}},
		{"model=Claude", nil},
	} {
		code, res := list(tc.query)
		var got []string
		for _, g := range res.GetGenerations() {
			got = append(got, g.GetGenerationId())
		}
		if code != http.StatusOK || !slices.Equal(got, tc.want) {
			t.Errorf("GET /v1/generations?%s: %d %v; want %v", tc.query, code, got, tc.want)
		}
	}
	_, res := list("model=claude")
	want := &agentdv1.Generation{StartedBy: "bob", EndUser: "u1", Provider: "anthropic", Model: "claude", TraceId: "0af7651916cd43dd8448eb211c80319c", ThreadId: "thr_1"}
	if g := res.GetGenerations()[0]; g.GetStartedBy() != want.GetStartedBy() || g.GetEndUser() != want.GetEndUser() || g.GetProvider() != want.GetProvider() ||
		g.GetModel() != want.GetModel() || g.GetTraceId() != want.GetTraceId() || g.GetThreadId() != want.GetThreadId() {
		t.Errorf("gen_c as listed: %v; want its origin %v", g, want)
	}

	_, page := list("model=claude&page_size=1")
	token := url.QueryEscape(page.GetNextPageToken())
	if code, next := list("model=claude&page_size=1&page_token=" + token); code != http.StatusOK || len(next.GetGenerations()) != 1 || next.GetGenerations()[0].GetGenerationId() != "gen_a" {
		t.Errorf("the next page with the same filters: %d %v; want gen_a", code, next)
	}
	// The other routes of this work: the caller, and a cancel (gen_a runs
	// on a replica that is not there: the answer shows it still running).
	if code, body := httpCall(t, client, http.MethodGet, "/v1/caller", ""); code != http.StatusOK || !strings.Contains(body, `"name":"anonymous"`) {
		t.Errorf("GET /v1/caller: %d %s; want the anonymous caller", code, body)
	}
	if code, body := httpCall(t, client, http.MethodPost, "/v1/generations/gen_a:cancel", `{"reason": "stop"}`); code != http.StatusOK ||
		!strings.Contains(body, `"state":"GENERATION_STATE_RUNNING"`) {
		t.Errorf("POST /v1/generations/gen_a:cancel: %d %s; want it still running, marked", code, body)
	}
	for _, query := range []string{
		"model=gpt&page_size=1&page_token=" + token,
		"page_token=" + token,
		"created_after=yesterday",
		"created_after=" + at(3) + "&created_before=" + at(3),
	} {
		if code, _ := list(query); code != http.StatusBadRequest {
			t.Errorf("GET /v1/generations?%s: %d; want 400", query, code)
		}
	}
}

// httpCall sends method path with body (JSON; none when empty) through
// client, and returns the answer's status and body.
func httpCall(t *testing.T, client *http.Client, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://proxy"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// The filters' checks over gRPC: a time range that is empty, or a time
// out of range, is INVALID_ARGUMENT naming its field.
func TestListGenerationsFilterErrors(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	client := newClientWith(t, server.Options{Bridge: &fakeBridge{}, Checkpoints: st, Generations: st.Generations(), Replica: "r"}, recordingScript())
	now := time.Now()
	for field, req := range map[string]*agentdv1.ListGenerationsRequest{
		"created_before": {CreatedAfter: timestamppb.New(now), CreatedBefore: timestamppb.New(now.Add(-time.Second))},
		"created_after":  {CreatedAfter: &timestamppb.Timestamp{Seconds: -1 << 40}},
	} {
		_, err := client.ListGenerations(t.Context(), req)
		if br := fieldViolations(status.Convert(err)); status.Code(err) != codes.InvalidArgument || len(br) != 1 || br[0].GetField() != field {
			t.Errorf("ListGenerations(%v): %v; want INVALID_ARGUMENT at %s", req, err, field)
		}
	}
}

// A detached start (CreateGeneration) runs in the trace of the call that
// started it: the record's trace id is the call's, and so is its started
// event's.
func TestDetachedStartTraceID(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	call := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x0a, 0xf7, 0x65, 0x19}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	// As otelgrpc's stats handler would: the call's span in its context.
	traced := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(trace.ContextWithSpanContext(ctx, call), req)
	})
	svc := server.New(server.Options{Providers: registryOf(t, recordingScript()), Bridge: &fakeBridge{}, Config: config.Default().Generation,
		Checkpoints: st, Generations: st.Generations(), Replica: "r", TracerProvider: sdktrace.NewTracerProvider()})
	client := agentdv1.NewAgentServiceClient(dial(t, svc.Register, traced))
	t.Cleanup(svc.Close)
	res, err := client.CreateGeneration(t.Context(), &agentdv1.CreateGenerationRequest{Start: &agentdv1.StartGeneration{Agent: textAgent(t, "hi"), Messages: userSays("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	want := call.TraceID().String()
	follow, err := client.FollowGeneration(t.Context(), &agentdv1.FollowGenerationRequest{GenerationId: res.GetGenerationId()})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := follow.Recv(); err != nil || first.GetEvent().GetStarted().GetTraceId() != want {
		t.Errorf("the first event: %v, %v; want started, in the call's trace %q", first, err, want)
	}
	if g := mustGet(t, client, res.GetGenerationId()); g.GetTraceId() != want {
		t.Errorf("the record's trace id: %q; want the call's, %q", g.GetTraceId(), want)
	}
}
