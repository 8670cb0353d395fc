package ollama

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/httpc"
	"github.com/agentd/agentd/providers/providertest"
)

// TestConformance replays testdata/*.txtar; R-T4: failed_tool_result shows
// a failed result reaching the model as its {"error": ...} text, since
// Ollama has no error flag.
func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, "testdata", func(t *testing.T, baseURL string) providers.Provider {
		return New(providers.Settings{APIKey: "test-key", BaseURL: baseURL})
	})
}

// roundTripper answers every request itself and records it.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestDefaultsReachLocalOllamaWithoutAuthorization(t *testing.T) {
	t.Parallel()
	var got *http.Request
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		got = r
		body := `{"message":{"role":"assistant","content":"hi"},"done":true,"done_reason":"stop"}` + "\n"
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	})}
	p := New(providers.Settings{HTTP: hc})
	req := &providers.Request{Model: "llama3.2", Messages: []*agentdv1.Message{{
		Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}},
	}}}
	for _, err := range p.Stream(t.Context(), req) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got == nil {
		t.Fatal("no request was sent")
	}
	if u := got.URL.String(); u != "http://localhost:11434/api/chat" {
		t.Errorf("URL = %s, want http://localhost:11434/api/chat", u)
	}
	if a := got.Header.Get("Authorization"); a != "" {
		t.Errorf("Authorization = %q without an API key", a)
	}
}

func TestMediaOllamaCannotTakeIsRefused(t *testing.T) {
	t.Parallel()
	for _, media := range []*agentdv1.Media{
		{MimeType: "image/png", Source: &agentdv1.Media_Uri{Uri: "https://example.com/cat.png"}},
		{MimeType: "audio/wav", Source: &agentdv1.Media_Data{Data: []byte("RIFF")}},
	} {
		req := &providers.Request{Model: "llava", Messages: []*agentdv1.Message{{
			Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Media{Media: media}}},
		}}}
		_, err := buildBody(req)
		if fault.KindOf(err) != fault.Invalid || !strings.Contains(err.Error(), media.GetMimeType()) {
			t.Errorf("%s: err = %v, want Invalid naming the type", media.GetMimeType(), err)
		}
	}
}

func TestValidateOptionsRefusesWhatTheAdapterSets(t *testing.T) {
	t.Parallel()
	p := New(providers.Settings{}).(providers.OptionsValidator)
	got := p.ValidateOptions(map[string]any{"stream": false, "model": "x", "options": map[string]any{"temperature": 0}, "think": true})
	var fields []string
	for _, pr := range got {
		fields = append(fields, pr.Field)
	}
	if diff := cmp.Diff([]string{"model", "stream"}, fields); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestToolCallKeepsAnIDOllamaGives(t *testing.T) {
	t.Parallel()
	stream := `{"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_x7","function":{"index":0,"name":"get_time","arguments":{"city":"Oslo"}}}]},"done":false}` + "\n" +
		`{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":5,"eval_count":2}` + "\n"
	var got []*agentdv1.ToolCall
	read(t.Context(), strings.NewReader(stream), httpc.NewCallIDs(nil), func(ev providers.Event, err error) bool {
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := ev.(*providers.ToolCall); ok {
			got = append(got, c.Call)
		}
		return true
	})
	if len(got) != 1 || got[0].GetId() != "call_x7" || got[0].GetArguments() != `{"city":"Oslo"}` {
		t.Errorf("calls = %v, want call_x7 get_time {\"city\":\"Oslo\"}", got)
	}
}

// Errors keep the API key (for a hosted Ollama) out, whatever the server
// echoes.
func TestSecretsStayOut(t *testing.T) {
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
