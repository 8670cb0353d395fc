package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
)

// An errorBody is an error answered outside a call, shaped as the
// transcoder answers a call's error over HTTP/JSON: a google.rpc.Status.
type errorBody struct {
	Code    codes.Code `json:"code"`
	Message string     `json:"message"`
	Details []any      `json:"details"`
}

// writeError answers status with a JSON error saying msg.
func writeError(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(errorBody{Code: codeOf(status), Message: msg, Details: []any{}})
	writeJSON(w, status, body)
}

// writeJSON answers status with body, a JSON error.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// codeOf is the gRPC code of an HTTP status the transcoder answers before
// any call, for the error's body.
func codeOf(status int) codes.Code {
	switch status {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType:
		return codes.InvalidArgument
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusRequestEntityTooLarge:
		return codes.ResourceExhausted
	case http.StatusMethodNotAllowed, http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return codes.Unimplemented
	}
	return codes.Unknown
}

// noRoute answers a request for no route and no RPC.
func noRoute(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s: GET /openapi.json lists the HTTP/JSON routes", r.Method, r.URL.Path))
}

// serveWithJSONErrors serves r with h, the transcoder, bounding a body
// that is one message to MaxBodyBytes (413), and answering in JSON the
// errors h answers in plain text: those it finds before any call begins
// (a content type it does not read, a method a route does not take).
func serveWithJSONErrors(h http.Handler, w http.ResponseWriter, r *http.Request) {
	ct := r.Header.Get("Content-Type")
	var body *limitedBody
	if !streaming(ct) {
		if r.ContentLength > MaxBodyBytes {
			writeError(w, http.StatusRequestEntityTooLarge, tooLarge)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			body = &limitedBody{r: io.LimitReader(r.Body, MaxBodyBytes+1), body: r.Body}
			r.Body = body
		}
	}
	ew := &errorWriter{ResponseWriter: w, body: body, contentType: ct}
	h.ServeHTTP(ew, r)
	ew.finish()
}

// tooLarge is the message of a body over MaxBodyBytes.
var tooLarge = fmt.Sprintf("the request body is larger than %d bytes", MaxBodyBytes)

// streaming reports whether contentType is that of a streaming protocol
// (Connect's streams, gRPC-Web), whose body is any number of messages.
func streaming(contentType string) bool {
	return strings.HasPrefix(contentType, "application/connect+") || strings.HasPrefix(contentType, "application/grpc-web")
}

// limitedBody reads a request body up to MaxBodyBytes, and says whether
// it held more.
type limitedBody struct {
	r        io.Reader
	body     io.ReadCloser
	n        int64
	exceeded bool
}

var errTooLarge = errors.New(tooLarge)

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > MaxBodyBytes {
		b.exceeded = true
		return 0, errTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.body.Close() }

// errorWriter passes a response through, except an error that the
// transcoder writes as plain text, or any answer to a body over the limit:
// finish writes those as JSON errors.
type errorWriter struct {
	http.ResponseWriter
	body        *limitedBody // nil when not bounded
	contentType string       // the request's

	held   bool // WriteHeader was held back: finish writes the error
	status int
	msg    bytes.Buffer
}

func (w *errorWriter) WriteHeader(status int) {
	switch {
	case w.body != nil && w.body.exceeded:
		w.held, w.status = true, http.StatusRequestEntityTooLarge
	case status >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain"):
		w.held, w.status = true, status
	default:
		w.ResponseWriter.WriteHeader(status)
	}
}

func (w *errorWriter) Write(p []byte) (int, error) {
	if w.held {
		return w.msg.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

func (w *errorWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.held {
		f.Flush()
	}
}

// Unwrap is the response written, for http.ResponseController.
func (w *errorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes the error held back.
func (w *errorWriter) finish() {
	if !w.held {
		return
	}
	msg := strings.TrimSpace(w.msg.String())
	switch w.status {
	case http.StatusRequestEntityTooLarge:
		msg = tooLarge
	case http.StatusUnsupportedMediaType:
		msg = fmt.Sprintf("content type %q is not served here: send application/json, or a Connect or gRPC-Web request (docs/http.md)", w.contentType)
	}
	writeError(w.ResponseWriter, w.status, msg)
}
