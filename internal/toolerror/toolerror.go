// Package toolerror renders a failed tool call as the model reads it:
// {"error":"<message>"}. The server (a tool nobody offers, a declined
// call) and the bridge (an MCP server's error, a result too large) both
// answer the model this way, so they share this one renderer and its one
// escaping rule.
package toolerror

import (
	"bytes"
	"encoding/json"
)

// JSON returns {"error":msg}. Nothing is HTML-escaped: the model reads
// '<', '>' and '&' as written, not as \u003c, \u003e and \u0026.
func JSON(msg string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"error": msg}) // a map of strings always encodes
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
