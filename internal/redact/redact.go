// Package redact hides secrets in the texts that leave agentd: the errors
// and log lines in which a server, a provider's API or a gateway in front
// of either quotes what a request carried. A provider's 401 may show part
// of its key; an MCP server's error may repeat its URL, whose path and
// query often hold a key, or the headers it was sent.
//
// A Redactor hides two kinds of secret:
//
//   - a credential (an API key, an authorization value, a header value)
//     becomes Mark wherever it appears: the value whole and, for a value
//     written "Scheme token", its token alone too. A value shorter than 4
//     bytes is left alone: hiding it would shred the text and guard
//     nothing;
//   - an endpoint's URL (ForEndpoint) keeps its scheme and host, which say
//     which server failed: the URL, its path and its query become
//     scheme://host/… wherever they appear.
//
// Every byte that lies inside an appearance of a secret is hidden, even
// where two secrets overlap, and a run of overlapping appearances becomes
// one replacement, that of the one that starts first (the longest of
// those). The replacement is never searched again, so a host that
// contains the path ("https://mcp.example.com/mcp") is not mangled.
package redact

import (
	"cmp"
	"errors"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Mark replaces a credential in a text.
const Mark = "[redacted]"

// minSecret is the length below which a credential is not hidden.
const minSecret = 4

// Redactor hides a fixed set of secrets in texts. A nil Redactor hides
// nothing. Its methods are safe for concurrent use.
type Redactor struct {
	rules []rule
	// opaque: the endpoint's URL does not parse, so its path cannot be
	// told apart: no text is kept.
	opaque bool
}

// rule replaces the text old with new.
type rule struct{ old, new string }

// New returns a Redactor that hides each of credentials as the package
// doc says.
func New(credentials ...string) *Redactor {
	r := &Redactor{}
	r.addCredentials(credentials)
	return r
}

// ForEndpoint returns a Redactor for the errors of a connection to the
// URL endpoint: it hides the URL's path and query, and credentials as New
// does. When endpoint does not parse, nothing of a text can be trusted:
// Text returns Mark, and Err an error that says only that the connection
// failed.
func ForEndpoint(endpoint string, credentials ...string) *Redactor {
	u, err := url.Parse(endpoint)
	if err != nil {
		return &Redactor{opaque: true}
	}
	safe := u.Scheme + "://" + u.Host + "/…"
	r := &Redactor{}
	for _, s := range append([]string{endpoint, u.String()}, urlParts(u)...) {
		if s != "" {
			r.rules = append(r.rules, rule{s, safe})
		}
	}
	r.addCredentials(credentials)
	return r
}

// URLSecrets lists the forms in which the secret part of the URL raw (its
// path and query) may be quoted, for a caller that hides them among its
// credentials (New), with Mark: raw whole if it does not parse.
func URLSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return []string{raw}
	}
	return urlParts(u)
}

// urlParts are u's path and query as a text may quote them: the request
// URI, the query, the path escaped and not. A bare "/" says nothing.
func urlParts(u *url.URL) []string {
	var out []string
	for _, s := range []string{u.RequestURI(), u.RawQuery, u.EscapedPath(), u.Path} {
		if s != "" && s != "/" {
			out = append(out, s)
		}
	}
	return out
}

// addCredentials adds the rules that hide credentials.
func (r *Redactor) addCredentials(credentials []string) {
	for _, c := range credentials {
		c = strings.TrimSpace(c)
		forms := []string{c}
		if _, token, ok := strings.Cut(c, " "); ok {
			forms = append(forms, strings.TrimSpace(token))
		}
		for _, f := range forms {
			if len(f) >= minSecret {
				r.rules = append(r.rules, rule{f, Mark})
			}
		}
	}
}

// span is one appearance of a rule's old text in a text: [start, end).
type span struct {
	start, end int
	new        string
}

// Text returns s with every secret hidden.
func (r *Redactor) Text(s string) string {
	if r == nil {
		return s
	}
	if r.opaque {
		return Mark
	}
	spans := r.find(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(spans); {
		first, end := spans[i], spans[i].end
		for i++; i < len(spans) && spans[i].start < end; i++ {
			end = max(end, spans[i].end)
		}
		b.WriteString(s[last:first.start])
		b.WriteString(first.new)
		last = end
	}
	b.WriteString(s[last:])
	return b.String()
}

// find lists every run of overlapping appearances of each secret in s, in
// order of their start, the longest first among those that start
// together.
func (r *Redactor) find(s string) []span {
	var spans []span
	for _, ru := range r.rules {
		appearances(s, ru.old, func(start, end int) {
			spans = append(spans, span{start, end, ru.new})
		})
	}
	// Stable: a URL's form and a credential of the same text, starting
	// together, keep the URL's replacement, whose rules come first.
	slices.SortStableFunc(spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end))
	})
	return spans
}

// appearances calls emit with each run of overlapping appearances of old
// in s, merged ([start, end)), in order. strings.Index finds a run's
// first appearance; Knuth, Morris and Pratt's automaton follows the run
// from there. So a text and a secret that repeat themselves ("aaaa…", as
// a hostile server's error may be) take time linear in their lengths, not
// in their product.
func appearances(s, old string, emit func(start, end int)) {
	m := len(old)
	if m == 0 {
		return
	}
	border := borders(old)
	for at := 0; at+m <= len(s); {
		i := strings.Index(s[at:], old)
		if i < 0 {
			return
		}
		start := at + i
		end := start + m
		// A later appearance overlaps the run if it starts before end: it
		// ends before end+m-1. k is how much of old the text read so far
		// ends with.
		for j, k := end, border[m-1]; j < len(s) && j-k < end; j++ {
			for k > 0 && s[j] != old[k] {
				k = border[k-1]
			}
			if s[j] == old[k] {
				k++
			}
			if k == m {
				end, k = j+1, border[m-1]
			}
		}
		emit(start, end)
		at = end
	}
}

// borders is old's failure function: for each prefix of old, the length
// of its longest proper prefix that is also its suffix.
func borders(old string) []int {
	b := make([]int, len(old))
	for i, k := 1, 0; i < len(old); i++ {
		for k > 0 && old[i] != old[k] {
			k = b[k-1]
		}
		if old[i] == old[k] {
			k++
		}
		b[i] = k
	}
	return b
}

// errUnreadable stands for an error whose text cannot be cleaned.
var errUnreadable = errors.New("connection failed")

// Err returns err with its text cleaned, still answering errors.Is and
// errors.As for its cause; nil for nil.
func (r *Redactor) Err(err error) error {
	if r == nil || err == nil {
		return err
	}
	if r.opaque {
		return errUnreadable
	}
	return &redacted{text: r.Text(err.Error()), err: err}
}

// redacted is an error whose text has been cleaned but that still answers
// errors.Is and errors.As for its cause.
type redacted struct {
	text string
	err  error
}

func (r *redacted) Error() string { return r.text }
func (r *redacted) Unwrap() error { return r.err }

// Shorten cuts s to at most n bytes, on a rune boundary, marking the cut:
// a text from outside (a provider's error, a server's message) may run to
// pages, and one cut after redaction never leaves the start of a secret
// behind.
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
