package httpc

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

// Redacted replaces a secret in an error's text.
const Redacted = "[redacted]"

// Redact returns err with every secret replaced by Redacted in its message
// and metadata: provider error texts reach clients, and an API or a
// gateway in front of it may quote the request it refuses (OpenAI's 401
// shows part of the key). A secret written "Scheme token" (an
// authorization value) is redacted as its token alone too. Values shorter
// than 4 bytes are skipped: they would shred the message and guard
// nothing. Errors that are not faults are returned as they are: adapters
// classify every error they yield.
func Redact(err error, secrets ...string) error {
	var fe *fault.Error
	if err == nil || !errors.As(err, &fe) {
		return err
	}
	var olds []string
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) >= 4 {
			olds = append(olds, s)
		}
		if _, token, ok := strings.Cut(s, " "); ok && len(strings.TrimSpace(token)) >= 4 {
			olds = append(olds, strings.TrimSpace(token))
		}
	}
	// Longest first: a URL's path is inside the URL.
	slices.SortStableFunc(olds, func(a, b string) int { return len(b) - len(a) })
	clean := func(s string) string {
		for _, old := range olds {
			s = strings.ReplaceAll(s, old, Redacted)
		}
		return s
	}
	msg := shorten(clean(fe.Msg), maxMessage)
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

// shorten cuts s to at most n bytes, on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// RedactErrors wraps a stream's yield so that every error it passes on is
// redacted of secrets.
func RedactErrors(yield func(providers.Event, error) bool, secrets ...string) func(providers.Event, error) bool {
	return func(ev providers.Event, err error) bool {
		return yield(ev, Redact(err, secrets...))
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
		if u, err := url.Parse(srv.GetUrl()); err == nil {
			s = append(s, u.RequestURI(), u.RawQuery, u.EscapedPath(), u.Path)
		} else {
			s = append(s, srv.GetUrl())
		}
	}
	return s
}
