package httpc_test

import (
	"errors"
	"strings"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/httpc"
)

// echoCut is the marker where a quoted request was cut out.
const echoCut = "[the request, quoted back by the provider, cut]"

// Redact hides secrets in a fault's message and metadata alike, and cuts
// out what quotes the conversation back, keeping its kind (internal/redact
// holds the secrets' rules' cases).
func TestRedact(t *testing.T) {
	t.Parallel()
	quoting := func(msg string) error {
		return fault.New(fault.Unauthenticated, "%s", msg).WithInfo("PROVIDER_AUTHENTICATION", map[string]string{"echo": msg})
	}
	said := []string{"tell me about the canary conversation", `{"q":"a \"quoted\" search"}`}
	tests := []struct {
		name    string
		err     error
		secrets []string
		want    string // message and metadata after redaction
	}{
		{"a key", quoting("bad key sk-canary-123"), []string{"sk-canary-123"}, "bad key [redacted]"},
		{"nothing to redact", quoting("quota exceeded"), []string{"sk-canary-123"}, "quota exceeded"},
		{"the request quoted back as JSON, with the key", quoting(`invalid api key sk-canary-123 for request: {"model":"m","messages":[{"role":"user","content":"tell me about the canary conversation"}]} (status 401)`),
			[]string{"sk-canary-123"}, "invalid api key [redacted] for request " + echoCut},
		{"an argument quoted, as JSON writes it in a string", quoting(`bad tool call: "{\"q\":\"a \\\"quoted\\\" search\"}"`), nil, "bad tool call " + echoCut},
		{"the conversation's words, unquoted", quoting("refused: tell me about the canary conversation"), nil, "refused " + echoCut},
		{"a short word is no echo", quoting("model not found"), nil, "model not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := httpc.Redact(tt.err, said, tt.secrets...)
			var fe *fault.Error
			if !errors.As(got, &fe) {
				t.Fatalf("Redact returned %T, want a *fault.Error", got)
			}
			if fe.Msg != tt.want || fe.Metadata["echo"] != tt.want {
				t.Errorf("message %q, metadata %q; want %q in both", fe.Msg, fe.Metadata["echo"], tt.want)
			}
			if fault.KindOf(got) != fault.Unauthenticated {
				t.Errorf("kind %v changed", fault.KindOf(got))
			}
		})
	}
	if httpc.Redact(nil, nil, "sk-canary-123") != nil {
		t.Error("Redact(nil) is not nil")
	}
	plain := errors.New("sk-canary-123")
	if httpc.Redact(plain, nil, "sk-canary-123") != plain {
		t.Error("an error that is not a fault was changed; adapters classify every error they yield")
	}
}

func TestRequestSecrets(t *testing.T) {
	t.Parallel()
	req := &providers.Request{MCPServers: []*agentdv1.MCPServer{
		{Name: "a", Transport: &agentdv1.MCPServer_Url{Url: "https://mcp.example.com/k-path/mcp?key=q-secret"}, Authorization: "Bearer tok-a", Headers: map[string]string{"X-Key": "hdr-a"}},
		{Name: "b", Transport: &agentdv1.MCPServer_Url{Url: "mcp://gmail"}},
	}}
	err := fault.New(fault.Invalid, "server https://mcp.example.com/k-path/mcp?key=q-secret refused Bearer tok-a with hdr-a; mcp://gmail too")
	got := httpc.Redact(err, nil, httpc.RequestSecrets(req)...).Error()
	for _, secret := range []string{"k-path", "q-secret", "tok-a", "hdr-a"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q shows %q", got, secret)
		}
	}
	for _, kept := range []string{"https://mcp.example.com", "mcp://gmail"} {
		if !strings.Contains(got, kept) {
			t.Errorf("%q lost %q, which names the server", got, kept)
		}
	}
}

// Long messages are shortened after redaction, so that a cut never leaves
// the start of a secret behind.
func TestRedactShortensAfterward(t *testing.T) {
	t.Parallel()
	const key = "sk-ant-api03-SECRETSECRETSECRETSECRET"
	msg := strings.Repeat("x", 980) + "x-api-key: " + key + strings.Repeat(" page", 200)
	err := httpc.Redact(fault.New(fault.Invalid, "%s", msg), nil, key)
	got := err.Error()
	if strings.Contains(got, "sk-ant") || strings.Contains(got, "SECRET") {
		t.Errorf("part of the key survived: ...%s", got[max(0, len(got)-80):])
	}
	if len(got) > 1100 {
		t.Errorf("message of %d bytes; want it shortened", len(got))
	}
}
