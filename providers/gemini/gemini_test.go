package gemini

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/httpc"
	"github.com/agentd/agentd/providers/providertest"
)

// TestConformance replays testdata/*.txtar; R-T4: failed_tool_result shows
// a failed result flagged with Gemini's "error" key.
func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, "testdata", func(t *testing.T, baseURL string) providers.Provider {
		return New(providers.Settings{APIKey: "test-key", BaseURL: baseURL})
	})
}

func hello() *providers.Request {
	return &providers.Request{Model: "gemini-2.5-flash", Messages: []*agentdv1.Message{{
		Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}},
	}}}
}

func firstError(t *testing.T, p providers.Provider) error {
	t.Helper()
	for _, err := range p.Stream(t.Context(), hello()) {
		if err != nil {
			return err
		}
	}
	return nil
}

func TestMissingKeyNamesWhereToSetIt(t *testing.T) {
	t.Parallel()
	err := firstError(t, New(providers.Settings{BaseURL: "http://127.0.0.1:1", KeyEnv: "GEMINI_API_KEY"}))
	if fault.KindOf(err) != fault.FailedPrecondition || !strings.Contains(err.Error(), "GEMINI_API_KEY") || !strings.Contains(err.Error(), "providers.gemini.api_key") {
		t.Errorf("err = %v, want FailedPrecondition naming GEMINI_API_KEY and providers.gemini.api_key", err)
	}
}

// TestKeyNeverInErrors is R-X4: whatever the API (or a proxy in front of
// it) answers, the key does not reach the error.
func TestKeyNeverInErrors(t *testing.T) {
	t.Parallel()
	const canary = "sk-canary-123"
	for _, tc := range []struct {
		name   string
		status int
		body   string
	}{
		{"401 echoing the key", 401, `{"error":{"code":401,"message":"API key sk-canary-123 is not authorized","status":"UNAUTHENTICATED"}}`},
		{"400 API_KEY_INVALID", 400, `[{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}]}}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if got := r.Header.Get("x-goog-api-key"); got != canary {
					t.Errorf("x-goog-api-key = %q", got)
				}
				if strings.Contains(r.URL.RawQuery, canary) {
					t.Errorf("the key is in the query: %q", r.URL.RawQuery)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			err := firstError(t, New(providers.Settings{APIKey: canary, BaseURL: srv.URL}))
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), canary) {
				t.Errorf("the key is in the error: %v", err)
			}
			if st := fault.Status(err); strings.Contains(st.String(), canary) {
				t.Errorf("the key is in the status: %v", st)
			}
			if k := fault.KindOf(err); k != fault.Unauthenticated {
				t.Errorf("kind = %v, want Unauthenticated", k)
			}
		})
	}
}

// Gemini's error body is read the same alone, in an array, and as an
// error event in the stream.
func TestErrorBodies(t *testing.T) {
	t.Parallel()
	const quota = `{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`
	const badKey = `{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT","details":[{"reason":"API_KEY_INVALID"}]}}`
	for _, tc := range []struct{ body, msg, typ string }{
		{quota, "quota", "RESOURCE_EXHAUSTED"},
		{"[" + quota + "]", "quota", "RESOURCE_EXHAUSTED"},
		{badKey, "API key not valid.", "authentication_error: API_KEY_INVALID"},
		{" [" + badKey + "]\n", "API key not valid.", "authentication_error: API_KEY_INVALID"},
		{"<html>502</html>", "<html>502</html>", ""},
	} {
		if msg, typ := errorMessage([]byte(tc.body)); msg != tc.msg || typ != tc.typ {
			t.Errorf("errorMessage(%s) = %q %q, want %q %q", tc.body, msg, typ, tc.msg, tc.typ)
		}
	}
	for _, data := range []string{quota, "[" + quota + "]"} {
		var err error
		read(t.Context(), strings.NewReader("data: "+data+"\n\n"), httpc.NewCallIDs(nil), func(_ providers.Event, e error) bool {
			err = e
			return e == nil
		})
		if fault.KindOf(err) != fault.Exhausted || !strings.Contains(err.Error(), "quota") {
			t.Errorf("stream event %s: %v; want ResourceExhausted saying quota", data, err)
		}
	}
}

func TestRetryableStatuses(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]bool{429: true, 500: true, 503: true, 504: true, 400: false, 401: false, 403: false, 404: false, 408: false, 409: false} {
		if got := retryable(status); got != want {
			t.Errorf("retryable(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestValidateOptionsRefusesContents(t *testing.T) {
	t.Parallel()
	p := New(providers.Settings{}).(providers.OptionsValidator)
	if got := p.ValidateOptions(map[string]any{"contents": []any{}, "generationConfig": map[string]any{}}); len(got) != 1 || got[0].Field != "contents" {
		t.Errorf("problems = %v, want one for contents", got)
	}
}

// The shared check: whatever the API echoes of the request, neither the
// key nor an MCP server's token reaches an error.
func TestSecretsEchoed(t *testing.T) {
	t.Parallel()
	providertest.CheckSecrets(t, func(baseURL, key string) providers.Provider {
		return New(providers.Settings{APIKey: key, BaseURL: baseURL, MaxRetries: -1})
	})
}

// X-H4: a stream that goes silent, or is cut short, fails as it does on
// every adapter.
func TestStreamFailures(t *testing.T) {
	t.Parallel()
	providertest.CheckStreamFailures(t, New)
}
