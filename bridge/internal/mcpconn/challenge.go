package mcpconn

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/agentd/agentd/internal/fault"
)

// authChallenge is what an HTTP MCP server's refusal of agentd's
// credentials said: its status, 401 or 403, and the parameters of
// its Bearer challenge (WWW-Authenticate) that agentd may repeat: the
// error code, the scope it asks for, and the host of its
// protected-resource metadata, never that URL's path, which may mirror
// the server's own (and a token in it).
type authChallenge struct {
	status       int
	errorCode    string
	scope        string
	metadataHost string
}

// challengeOf is the challenge of a response with status 401 or 403; nil
// for any other.
func challengeOf(resp *http.Response) *authChallenge {
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	a := &authChallenge{status: resp.StatusCode}
	challenges, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return a // a malformed challenge still refused the credentials
	}
	for _, c := range challenges {
		if c.Scheme != "bearer" {
			continue
		}
		a.errorCode = token(c.Params["error"])
		a.scope = scopeList(c.Params["scope"])
		if u, err := url.Parse(c.Params["resource_metadata"]); err == nil && u.Host != "" {
			a.metadataHost = u.Scheme + "://" + u.Host
		}
		break
	}
	return a
}

// token keeps s if it is an OAuth error code (RFC 6750: printable ASCII
// without quotes or backslashes), bounded; "" otherwise, so that no
// server text of any length or shape reaches an error.
func token(s string) string {
	if len(s) > 64 {
		return ""
	}
	for _, r := range s {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return ""
		}
	}
	return s
}

// scopeList keeps the scope tokens of s, space separated, each a token
// and at most 32 of them.
func scopeList(s string) string {
	var out []string
	for _, f := range strings.Fields(s) {
		if t := token(f); t != "" && len(out) < 32 {
			out = append(out, t)
		}
	}
	return strings.Join(out, " ")
}

// fault is the failure of a request that the server refused as a, when
// agentd does not resolve the server's refusals (it was not declared with
// oauth), or could not: the generation ends Unauthenticated (401) or
// PermissionDenied (403), naming the server and what it asked for, rather
// than Unavailable.
func (a *authChallenge) fault(server, request string) error {
	asked := ""
	if a.scope != "" {
		asked += fmt.Sprintf("; it asks for the scope %q", a.scope)
	}
	if a.metadataHost != "" {
		asked += "; its authorization is described by the protected-resource metadata at " + a.metadataHost
	}
	if a.errorCode != "" {
		asked += fmt.Sprintf(" (error %q)", a.errorCode)
	}
	info := map[string]string{"server": server, "request": request, "status": strconv.Itoa(a.status)}
	for k, v := range map[string]string{"scope": a.scope, "resource_metadata_host": a.metadataHost, "error": a.errorCode} {
		if v != "" {
			info[k] = v
		}
	}
	if a.status == http.StatusForbidden {
		return fault.New(fault.Permission,
			"the MCP server %q refused %s with the credentials its mcps entry gives (HTTP 403)%s", server, request, asked).
			WithInfo("MCP_FORBIDDEN", info)
	}
	return fault.New(fault.Unauthenticated,
		"the MCP server %q requires authorization for %s, which its mcps entry does not give (HTTP 401: set authorization, or a token it accepts)%s", server, request, asked).
		WithInfo("MCP_UNAUTHORIZED", info)
}
