package providertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

// Canary secrets: the API key and an MCP server's token that CheckSecrets
// sends, and looks for in the errors.
const (
	CanaryKey   = "sk-canary-0123456789"
	CanaryToken = "mcp-canary-9876543210"
)

// The conversation CheckSecrets sends, and looks for in the errors: what
// was said stays out of them as secrets do.
const (
	CanaryInstructions = "cnry-instructions: answer as the canary"
	CanaryMessage      = "cnry-message: what the user said"
	CanaryTool         = "cnry-tool: what the tool does"
)

// CheckSecrets proves that an adapter's errors never carry its API key, a
// provider-side MCP server's token, or the conversation (instructions,
// messages, tools' descriptions), even when the API quotes back the whole
// request it refuses (as gateways do): it answers every attempt
// with the given status and an error body, in the shapes the adapters
// read, that echoes the request's header values, query and body. newProvider
// makes the adapter with baseURL and apiKey; it must not retry with real
// sleeps.
func CheckSecrets(t *testing.T, newProvider func(baseURL, apiKey string) providers.Provider) {
	t.Helper()
	for _, status := range []int{http.StatusUnauthorized, http.StatusBadRequest, http.StatusInternalServerError} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			var carried strings.Builder
			srv := httptest.NewServer(echoRefusal(status, &carried))
			defer srv.Close()
			p := newProvider(srv.URL, CanaryKey)
			req := &providers.Request{
				Model:        "canary-model",
				Instructions: CanaryInstructions,
				Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{
					{Kind: &agentdv1.Part_Text{Text: CanaryMessage}},
				}}},
				Tools:          []*agentdv1.FunctionTool{{Name: "canary_tool", Description: CanaryTool}},
				ToolParameters: []json.RawMessage{json.RawMessage(`{"type":"object"}`)},
			}
			if p.Capabilities().ServesURLServers {
				req.MCPServers = []*agentdv1.MCPServer{{
					Name: "docs", Transport: &agentdv1.MCPServer_Url{Url: "https://docs.example.com/mcp"}, Authorization: "Bearer " + CanaryToken,
				}}
			}
			err := FirstError(t.Context(), p, req)
			if err == nil {
				t.Fatalf("status %d: no error", status)
			}
			for _, c := range []string{CanaryKey, CanaryMessage, CanaryInstructions, CanaryTool} {
				if !strings.Contains(carried.String(), c) {
					t.Fatalf("the request did not carry %q: the check checks nothing", c)
				}
			}
			checkNoSecrets(t, err)
		})
	}
}

// echoRefusal answers every request with status and an error body that
// echoes the request's header values, query and body, which it also
// writes to carried.
func echoRefusal(status int, carried *strings.Builder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var echo strings.Builder
		for _, vs := range r.Header {
			echo.WriteString(strings.Join(vs, " ") + " ")
		}
		echo.WriteString(r.URL.RawQuery + " " + string(body))
		carried.WriteString(echo.String())
		msg := strings.NewReplacer(`"`, `'`, "\n", " ", `\`, "/").Replace(echo.String())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","code":%d,"status":"INVALID_ARGUMENT","message":"refused: %s"}}`, status, msg)
	})
}

// checkNoSecrets checks that no rendering of err shows the canaries.
func checkNoSecrets(t *testing.T, err error) {
	t.Helper()
	st := fault.Status(err)
	for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), st.Message(), fmt.Sprint(st.Details())} {
		for _, secret := range []string{CanaryKey, CanaryToken, CanaryMessage, CanaryInstructions, CanaryTool} {
			if strings.Contains(text, secret) {
				t.Errorf("the error shows %q: %s", secret, text)
			}
		}
	}
}

// FirstError runs one turn of p and returns the first error it yields, or
// nil when the turn ends without one.
func FirstError(ctx context.Context, p providers.Provider, req *providers.Request) error {
	for _, err := range p.Stream(ctx, req) {
		if err != nil {
			return err
		}
	}
	return nil
}
