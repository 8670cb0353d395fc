package httpc

import (
	"errors"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/redact"
	"github.com/agentd/agentd/providers"
)

// Redact returns err with every secret hidden in its message and metadata
// (internal/redact's rules for credentials), and the part of them that
// quotes the conversation cut out (echo.go): provider error texts reach
// clients, and an API or a gateway in front of it may quote the request
// it refuses (OpenAI's 401 shows part of the key). The message is then
// shortened, so that a cut never leaves the start of a secret behind.
// Errors that are not faults are returned as they are: adapters classify
// every error they yield.
func Redact(err error, conversation []string, secrets ...string) error {
	var fe *fault.Error
	if err == nil || !errors.As(err, &fe) {
		return err
	}
	r := redact.New(secrets...)
	clean := func(s string) string { return r.Text(cutEchoes(s, conversation)) }
	msg := redact.Shorten(clean(fe.Msg), maxMessage)
	changed := msg != fe.Msg
	var meta map[string]string
	if fe.Metadata != nil {
		meta = make(map[string]string, len(fe.Metadata))
		for k, v := range fe.Metadata {
			meta[k] = clean(v)
			changed = changed || meta[k] != v
		}
	}
	if !changed {
		return err
	}
	out := *fe
	out.Msg, out.Metadata = msg, meta
	return &out
}

// maxMessage is the longest error message Redact passes on: a provider or
// gateway may answer an error with a whole page.
const maxMessage = 1000

// RedactErrors wraps a stream's yield so that every error it passes on is
// redacted of secrets, and of req's conversation should the provider
// quote the request back (echo.go).
func RedactErrors(yield func(providers.Event, error) bool, req *providers.Request, secrets ...string) func(providers.Event, error) bool {
	return func(ev providers.Event, err error) bool {
		if err == nil {
			return yield(ev, nil)
		}
		// Gathered for an error alone: every turn would walk the whole
		// conversation otherwise.
		return yield(ev, Redact(err, RequestTexts(req), secrets...))
	}
}

// RequestSecrets lists what a request carries to its provider-side MCP
// servers that must stay out of errors: their authorization and header
// values, and their URLs' paths and queries (which often carry keys).
func RequestSecrets(req *providers.Request) []string {
	var s []string
	for _, srv := range req.MCPServers {
		s = append(s, srv.GetAuthorization())
		for _, v := range srv.GetHeaders() {
			s = append(s, v)
		}
		// The scheme and host stay: they say which server failed.
		s = append(s, redact.URLSecrets(srv.GetUrl())...)
	}
	return s
}
