package openairesponses_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/openairesponses"
	"github.com/agentd/agentd/providers/providertest"
)

// The transcripts use the real API's path: the base URL ends in /v1 as
// OpenAI's does.
func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, "testdata", func(t *testing.T, baseURL string) providers.Provider {
		return openairesponses.New(providers.Settings{APIKey: "test-key", BaseURL: baseURL + "/v1"})
	})
}

// stream runs one turn and returns its events and error.
func stream(t *testing.T, p providers.Provider, req *providers.Request) ([]providers.Event, error) {
	t.Helper()
	var evs []providers.Event
	for ev, err := range p.Stream(t.Context(), req) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func hello() *providers.Request {
	return &providers.Request{Model: "gpt-5-mini", Messages: []*agentdv1.Message{{
		Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}},
	}}}
}

// Neither the API key nor an MCP server's credentials reach an error text,
// even when the API echoes them.
func TestSecretsNeverInErrors(t *testing.T) {
	t.Parallel()
	const key, auth, header = "sk-canary-123", "mcp-canary-456", "hdr-canary-789"
	for _, tc := range []struct {
		name   string
		status int
		body   string
		kind   fault.Kind
	}{
		{"401", http.StatusUnauthorized, `{"error": {"message": "Incorrect API key provided: sk-canary-123. You can find your API key at https://platform.openai.com/account/api-keys.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}`, fault.Unauthenticated},
		{"400", http.StatusBadRequest, `{"error": {"message": "Error retrieving tool list from MCP server: 'wiki'. Authorization 'Bearer mcp-canary-456' rejected; header hdr-canary-789", "type": "invalid_request_error", "param": "tools", "code": null}}`, fault.Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			p := openairesponses.New(providers.Settings{APIKey: key, BaseURL: srv.URL})
			req := hello()
			req.MCPServers = []*agentdv1.MCPServer{{
				Name: "wiki", Transport: &agentdv1.MCPServer_Url{Url: "https://wiki.example/mcp"},
				Authorization: auth, Headers: map[string]string{"X-Key": header},
			}}
			_, err := stream(t, p, req)
			if err == nil {
				t.Fatal("no error")
			}
			if got := fault.KindOf(err); got != tc.kind {
				t.Errorf("kind %v, want %v (%v)", got, tc.kind, err)
			}
			st := fault.Status(err)
			for _, secret := range []string{key, auth, header} {
				if strings.Contains(err.Error(), secret) || strings.Contains(st.String(), secret) {
					t.Errorf("the error shows %q: %v", secret, st)
				}
			}
		})
	}
}

func TestMissingAPIKey(t *testing.T) {
	t.Parallel()
	p := openairesponses.New(providers.Settings{BaseURL: "http://127.0.0.1:1", KeyEnv: "OPENAI_API_KEY"})
	_, err := stream(t, p, hello())
	if fault.KindOf(err) != fault.FailedPrecondition {
		t.Fatalf("error %v, want FailedPrecondition", err)
	}
	for _, want := range []string{"OPENAI_API_KEY", "providers.openai-responses.api_key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// Settings.Options organization and project become OpenAI's headers.
func TestOrganizationAndProject(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n"))
	}))
	defer srv.Close()
	p := openairesponses.New(providers.Settings{APIKey: "k", BaseURL: srv.URL, Options: map[string]string{"organization": "org-1", "project": "proj_1"}})
	if _, err := stream(t, p, hello()); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.Get("OpenAI-Organization") != "org-1" || h.Get("OpenAI-Project") != "proj_1" {
		t.Errorf("headers %v, want OpenAI-Organization org-1 and OpenAI-Project proj_1", h)
	}
}

// Configuration problems of provider-side servers are refused before
// anything is sent.
func TestInvalidServers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, url, auth string
		want            []string
	}{
		{"unknown connector", "mcp://github", "tok", []string{`"gh"`, "mcp://github", "dropbox, gmail, googlecalendar, googledrive, microsoftteams, outlookcalendar, outlookemail, sharepoint"}},
		{"connector without a token", "mcp://gmail", "", []string{`"gh"`, "gmail", "authorization"}},
		{"connector with another scheme", "mcp://outlook", "Basic dXNlcjpwYXNz", []string{"outlookemail", "authorization"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := openairesponses.New(providers.Settings{APIKey: "k", BaseURL: "http://127.0.0.1:1"})
			req := hello()
			req.MCPServers = []*agentdv1.MCPServer{{Name: "gh", Transport: &agentdv1.MCPServer_Url{Url: tc.url}, Authorization: tc.auth}}
			_, err := stream(t, p, req)
			if fault.KindOf(err) != fault.Invalid {
				t.Fatalf("error %v, want Invalid", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if tc.auth != "" && strings.Contains(err.Error(), tc.auth) {
				t.Errorf("error %q shows the authorization", err)
			}
		})
	}
}

func TestValidateOptions(t *testing.T) {
	t.Parallel()
	p := openairesponses.New(providers.Settings{}).(providers.OptionsValidator)
	got := p.ValidateOptions(map[string]any{
		"store": true, "previous_response_id": "resp_1", "tools": map[string]any{"type": "mcp"},
		"temperature": 0.2, "include": []any{"file_search_call.results"},
	})
	want := []providers.Problem{
		{Field: "store", Description: "is set by agentd and cannot be given as a provider option"},
		{Field: "previous_response_id", Description: "keeps the conversation at OpenAI; agentd replays it every turn, so a generation can resume on any replica"},
		{Field: "tools", Description: "must be a list"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	p := openairesponses.New(providers.Settings{})
	if p.Name() != "openai-responses" {
		t.Errorf("name %q", p.Name())
	}
	want := providers.Capabilities{ServesURLServers: true, ServesConnectors: true}
	caps := p.Capabilities()
	if diff := cmp.Diff(want, caps, cmpopts.IgnoreFields(providers.Capabilities{}, "ServerProblem", "Output")); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
	// An output schema goes in text.format on every turn, with tools or
	// without.
	for _, withTools := range []bool{false, true} {
		if caps.Output == nil || !caps.Output("gpt-5-mini", withTools) {
			t.Errorf("Output(gpt-5-mini, withTools %v) = false, want true", withTools)
		}
	}
}

// The shared check: whatever the API echoes of the request, neither the
// key nor an MCP server's token reaches an error.
func TestSecretsEchoed(t *testing.T) {
	t.Parallel()
	providertest.CheckSecrets(t, func(baseURL, key string) providers.Provider {
		return openairesponses.New(providers.Settings{APIKey: key, BaseURL: baseURL, MaxRetries: -1})
	})
}

// X-H4: a stream that goes silent, or is cut short, fails as it does on
// every adapter.
func TestStreamFailures(t *testing.T) {
	t.Parallel()
	providertest.CheckStreamFailures(t, openairesponses.New)
}
