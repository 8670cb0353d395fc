package redact_test

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/redact"
)

// Credentials are hidden whole and, for an authorization value, as their
// token alone; tiny values are left alone.
func TestCredentials(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		text        string
		credentials []string
		want        string
	}{
		{"a key", "bad key sk-canary-123", []string{"sk-canary-123"}, "bad key [redacted]"},
		{"an authorization value and its token alone", "got Bearer tok-1234 then tok-1234", []string{"Bearer tok-1234"}, "got [redacted] then [redacted]"},
		{"tiny and empty values are skipped", "the key abc", []string{"", "abc", "Bearer x"}, "the key abc"},
		{"nothing to redact", "quota exceeded", []string{"sk-canary-123"}, "quota exceeded"},
		{"a value padded with spaces", "got tok-1234.", []string{"  tok-1234 "}, "got [redacted]."},
		// Neither secret may leave part of itself behind where they
		// overlap, whichever starts first.
		{"overlapping secrets", "x hdr-5678abcd y", []string{"5678abcd", "hdr-5678"}, "x [redacted] y"},
		// The mark is never searched again: a secret that the mark
		// contains does not mangle it.
		{"a secret inside the mark", "the redacted value", []string{"redacted"}, "the [redacted] value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := redact.New(tt.credentials...).Text(tt.text); got != tt.want {
				t.Errorf("Text(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

// R-X4: an endpoint's errors name its host, never its URL's path or query.
func TestEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		raw     string
		err     string
		want    string   // exact text, when set
		secrets []string // must not appear
		keep    []string // must appear
	}{
		{
			name:    "R-X4 full URL in the text",
			raw:     "https://mcp.example.com/v1/tenant-42/mcp?api_key=sk-123",
			err:     `Post "https://mcp.example.com/v1/tenant-42/mcp?api_key=sk-123": dial tcp: lookup mcp.example.com: no such host`,
			secrets: []string{"tenant-42", "api_key", "sk-123"},
			keep:    []string{"mcp.example.com", "no such host"},
		},
		{
			name:    "R-X4 path alone in the text",
			raw:     "https://h.example/secret/path",
			err:     "404 Not Found at /secret/path",
			secrets: []string{"/secret/path"},
			keep:    []string{"404 Not Found"},
		},
		{
			name:    "R-X4 query alone in the text",
			raw:     "https://h.example/x?key=sk-123",
			err:     "rejected key=sk-123",
			secrets: []string{"sk-123"},
		},
		{
			name:    "R-X4 user info in the URL",
			raw:     "https://user:pw-secret@h.example/p",
			err:     `Get "https://user:pw-secret@h.example/p": EOF`,
			secrets: []string{"pw-secret"},
			keep:    []string{"h.example"},
		},
		{
			// The host holds the path's text: the replacement must not
			// rewrite its own output.
			name: "host containing the path",
			raw:  "https://mcp.example.com/mcp",
			err:  `Post "https://mcp.example.com/mcp": EOF`,
			want: `Post "https://mcp.example.com/…": EOF`,
		},
		{
			name: "no path",
			raw:  "https://h.example",
			err:  `Post "https://h.example": EOF`,
			want: `Post "https://h.example/…": EOF`,
		},
		{
			name:    "unparsable URL",
			raw:     "https://h.example/%zz?key=sk-123",
			err:     "failed for https://h.example/%zz?key=sk-123",
			want:    "connection failed",
			secrets: []string{"sk-123"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := redact.ForEndpoint(tc.raw).Err(errors.New(tc.err)).Error()
			if tc.want != "" && got != tc.want {
				t.Errorf("Err = %q, want %q", got, tc.want)
			}
			for _, s := range tc.secrets {
				if strings.Contains(got, s) {
					t.Errorf("Err = %q: contains %q", got, s)
				}
			}
			for _, s := range tc.keep {
				if !strings.Contains(got, s) {
					t.Errorf("Err = %q: lost %q", got, s)
				}
			}
		})
	}
}

// An endpoint's credentials, quoted back in its errors, are hidden with
// its URL, each as its own mark; Text and Err agree.
func TestEndpointCredentials(t *testing.T) {
	t.Parallel()
	r := redact.ForEndpoint("https://mcp.example.com/mcp?key=q-1", "Basic dXNlcjpwYXNz", "hdr-secret", "ab")
	in := `401 from https://mcp.example.com/mcp?key=q-1 for "Basic dXNlcjpwYXNz" (dXNlcjpwYXNz), header hdr-secret, ab`
	want := `401 from https://mcp.example.com/… for "[redacted]" ([redacted]), header [redacted], ab`
	if got := r.Text(in); got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
	if got := r.Err(errors.New(in)).Error(); got != want {
		t.Errorf("Err = %q, want %q", got, want)
	}
}

// Err keeps the chain of the error it cleans, and passes nil on; a nil
// Redactor hides nothing.
func TestErr(t *testing.T) {
	t.Parallel()
	cause := &wrapped{io.EOF}
	got := redact.New("sk-canary-123").Err(cause)
	if !errors.Is(got, io.EOF) {
		t.Errorf("errors.Is(%v, io.EOF) is false: the chain was lost", got)
	}
	if redact.New("sk-canary-123").Err(nil) != nil {
		t.Error("Err(nil) is not nil")
	}
	var none *redact.Redactor
	if none.Text("sk-canary-123") != "sk-canary-123" || none.Err(cause) != cause {
		t.Error("a nil Redactor changed a text")
	}
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "wrapped sk-canary-123" }
func (w *wrapped) Unwrap() error { return w.err }

// URLSecrets lists a URL's path and query in the forms a text quotes
// them, never its scheme or host.
func TestURLSecrets(t *testing.T) {
	t.Parallel()
	got := redact.URLSecrets("https://mcp.example.com/k%20path/mcp?key=q-secret")
	for _, want := range []string{"/k%20path/mcp?key=q-secret", "key=q-secret", "/k%20path/mcp", "/k path/mcp"} {
		if !slices.Contains(got, want) {
			t.Errorf("URLSecrets = %q, lacks %q", got, want)
		}
	}
	for _, s := range got {
		if strings.Contains(s, "mcp.example.com") {
			t.Errorf("URLSecrets = %q: %q names the host", got, s)
		}
	}
	if got := redact.URLSecrets("https://h.example/%zz"); !slices.Equal(got, []string{"https://h.example/%zz"}) {
		t.Errorf("URLSecrets of an unparsable URL = %q, want it whole", got)
	}
	if got := redact.URLSecrets("mcp://gmail"); len(got) != 0 {
		t.Errorf("URLSecrets of a URL without path = %q, want none", got)
	}
}

// An endpoint whose forms are empty ("", "#") hides nothing it has not
// got, and does not fail.
func TestEmptyEndpointForms(t *testing.T) {
	t.Parallel()
	for _, endpoint := range []string{"", "#"} {
		if got := redact.ForEndpoint(endpoint, "sk-secret-1").Text("refused sk-secret-1"); got != "refused "+redact.Mark {
			t.Errorf("ForEndpoint(%q).Text = %q; want the credential hidden", endpoint, got)
		}
	}
}

// A secret that repeats itself, in a text that does too, is hidden as one
// run of overlapping appearances: the text becomes one mark, and the work
// is linear in the lengths (a hostile server's error may be large).
func TestSelfOverlappingSecrets(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("a", 1<<20)
	for _, secret := range []string{strings.Repeat("a", 1<<16), "aaaa", "aaab"} {
		want := redact.Mark
		if secret == "aaab" {
			want = text // not there
		}
		if got := redact.New(secret).Text(text); got != want {
			t.Errorf("secret %.8q…: the text became %.20q… (%d bytes); want %.20q…", secret, got, len(got), want)
		}
	}
	if got := redact.New("abab").Text("xabababay abab"); got != "x"+redact.Mark+"ay "+redact.Mark {
		t.Errorf("overlapping runs: %q", got)
	}
}

// Shorten keeps a text within n bytes, never splitting a rune, and marks
// the cut; a short text is left as it is.
func TestShorten(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"a longer text", 8, "a longer…"},
		{"héllo", 2, "h…"}, // é is two bytes: the cut goes before it
	} {
		if got := redact.Shorten(tc.s, tc.n); got != tc.want {
			t.Errorf("Shorten(%q, %d) = %q; want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
