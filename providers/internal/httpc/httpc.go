// Package httpc is the HTTP client every provider adapter shares: JSON
// requests to a base URL with the provider's headers, retries with
// back-off that honour retry-after-ms, retry-after and x-should-retry and
// retry only what the provider says is retryable, errors classified once
// (rate limited, overloaded, invalid request, authentication, context too
// long) with internal/fault, and one rule for a response stream that fails
// after it began (StreamError). Error texts carry the provider's message,
// never a header or a URL query.
package httpc

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

// Client sends one provider's requests. Its fields are set once; it is
// safe for concurrent use.
type Client struct {
	// Provider names the provider in errors.
	Provider string
	// BaseURL is the API's base, without a trailing slash.
	BaseURL string
	// Header holds authentication and fixed headers. Secret.
	Header http.Header
	// Query is added to every request (Azure's api-version). Not secret.
	Query url.Values
	// HTTP carries the requests; nil means http.DefaultClient.
	HTTP *http.Client
	// MaxRetries is how often a retryable failure is retried (0: none).
	MaxRetries int
	// MinBackoff and MaxBackoff bound the wait between attempts when the
	// provider does not say; zero means 500 ms and 8 s.
	MinBackoff, MaxBackoff time.Duration
	// ErrorMessage extracts the provider's message and error type from an
	// error body; nil takes the body's "error.message".
	ErrorMessage func(body []byte) (message, errType string)
	// Retryable overrides which statuses are retried (the x-should-retry
	// header still wins); nil means 408, 409, 429 and every 5xx.
	Retryable func(status int) bool
	// sleep waits between attempts; tests replace it.
	sleep func(context.Context, time.Duration) error
}

// New is a Client for provider configured by s: its base URL (else
// defaultBase), without a trailing slash; its HTTP client (NewHTTPClient);
// its retries. h
// holds authentication and fixed headers. The caller sets the rest
// (Query, ErrorMessage, Retryable) before first use.
func New(provider string, s providers.Settings, defaultBase string, h http.Header) *Client {
	base := strings.TrimSuffix(s.BaseURL, "/")
	if base == "" {
		base = strings.TrimSuffix(defaultBase, "/")
	}
	return &Client{Provider: provider, BaseURL: base, Header: h, HTTP: NewHTTPClient(s), MaxRetries: s.Retries()}
}

// OpenAIHeaders sets the headers that OpenAI's options name, for the
// adapters of its APIs: "organization" sets OpenAI-Organization and
// "project" OpenAI-Project.
func OpenAIHeaders(h http.Header, s providers.Settings) {
	for option, header := range openAIHeaders {
		if v := s.Options[option]; v != "" {
			h.Set(header, v)
		}
	}
}

var openAIHeaders = map[string]string{"organization": "OpenAI-Organization", "project": "OpenAI-Project"}

// MissingKey is the error of a request made without an API key, saying
// where to set one.
func MissingKey(provider string, s providers.Settings) error {
	where := "providers." + provider + ".api_key"
	if s.KeyEnv != "" {
		where = s.KeyEnv + " or " + where
	}
	return fault.New(fault.FailedPrecondition, "%s: no API key is configured: set %s", provider, where)
}

// CloseIdleConnections closes the client's idle keep-alive connections
// (at shutdown: their goroutines end with them).
func (c *Client) CloseIdleConnections() {
	if c.HTTP != nil {
		c.HTTP.CloseIdleConnections()
	}
}

// SetSleep replaces the wait between attempts (for tests: no real sleep).
func (c *Client) SetSleep(f func(context.Context, time.Duration) error) { c.sleep = f }

// Do sends body as JSON with method to path and returns the response of
// the first attempt that succeeded (2xx); the caller closes its body.
// Connection failures and retryable statuses are retried with back-off.
func (c *Client) Do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	data, err := Marshal(body)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "%s: encoding the request", c.Provider)
	}
	u := c.BaseURL + path
	if len(c.Query) > 0 {
		u += "?" + c.Query.Encode()
	}
	obs := providers.Observe(ctx)
	if host, port, ok := endpoint(c.BaseURL); ok {
		obs.Sending(host, port)
	}
	for attempt := 0; ; attempt++ {
		o := c.attempt(ctx, method, u, data)
		if o.err == nil || !o.retry || attempt >= c.MaxRetries {
			return o.resp, o.err
		}
		o.report.Attempt = attempt + 1
		if err := c.wait(ctx, obs, o.report, o.header); errors.Is(err, errWaitTooLong) {
			return nil, o.err
		} else if err != nil {
			return nil, err
		}
	}
}

// outcome is what one attempt came to: its response when it succeeded;
// else its error, whether another attempt may follow, and what to report
// of that retry (the failure or the status) with the response's header,
// which may say how long to wait.
type outcome struct {
	resp   *http.Response
	err    error
	retry  bool
	report providers.Retry
	header http.Header
}

// attempt sends one request.
func (c *Client) attempt(ctx context.Context, method, u string, data []byte) outcome {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(data))
	if err != nil {
		return outcome{err: fault.Wrap(fault.Internal, err, "%s: building the request", c.Provider)}
	}
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cmp.Or(c.HTTP, http.DefaultClient).Do(req)
	if err != nil {
		return c.unreached(ctx, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return outcome{resp: resp}
	}
	ferr := c.classify(resp)
	return outcome{err: ferr, retry: c.retryable(resp), report: providers.Retry{Status: resp.StatusCode}, header: resp.Header}
}

// unreached is the outcome of a request that got no response: the
// caller's context ended, or a connection failed or timed out, which may
// be retried.
func (c *Client) unreached(ctx context.Context, err error) outcome {
	if ctx.Err() != nil {
		return outcome{err: ctx.Err()}
	}
	failure := "connection"
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		failure = "timeout"
	}
	return outcome{
		err:   fault.Hide(fault.Unavailable, err, "%s: the API could not be reached", c.Provider),
		retry: true, report: providers.Retry{Failure: failure},
	}
}

func (c *Client) retryable(resp *http.Response) bool {
	switch strings.ToLower(resp.Header.Get("x-should-retry")) {
	case "true":
		return true
	case "false":
		return false
	}
	if c.Retryable != nil {
		return c.Retryable(resp.StatusCode)
	}
	s := resp.StatusCode
	return s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
}

// errWaitTooLong: the provider asked to wait longer than a minute before
// retrying; its error goes to the caller instead.
var errWaitTooLong = errors.New("the provider asked to wait longer than a minute")

// endpoint is the host and port of base, for telemetry: never its path
// or query. The port is the scheme's when base names none.
func endpoint(base string) (host string, port int, ok bool) {
	u, err := url.Parse(base)
	if err != nil || u.Hostname() == "" {
		return "", 0, false
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return u.Hostname(), p, true
	}
	switch u.Scheme {
	case "http":
		return u.Hostname(), 80, true
	case "https":
		return u.Hostname(), 443, true
	}
	return u.Hostname(), 0, true
}

// wait sleeps before the next attempt: what the provider asked for
// (retry-after-ms, retry-after in seconds or as a date), else exponential
// back-off with jitter, and reports the retry (r, with its delay) to obs
// first. It returns errWaitTooLong, without sleeping or reporting, when
// the provider asks for more than a minute.
func (c *Client) wait(ctx context.Context, obs *providers.Observer, r providers.Retry, h http.Header) error {
	d := retryAfter(h)
	switch {
	case d > time.Minute:
		return errWaitTooLong // a server asking for longer gets its error now
	case d < 0:
		d = c.backoff(r.Attempt - 1)
	}
	r.Delay = d
	obs.Retrying(r)
	sleep := c.sleep
	if sleep == nil {
		sleep = sleepContext
	}
	return sleep(ctx, d)
}

// retryAfter is how long the provider asked to wait (retry-after-ms, else
// retry-after in seconds or as a date); negative when it did not ask.
func retryAfter(h http.Header) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("retry-after-ms"), 64); err == nil && ms >= 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	s := h.Get("retry-after")
	if secs, err := strconv.ParseFloat(s, 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(s); err == nil {
		return max(time.Until(t), 0)
	}
	return -1
}

// backoff is the wait before the retry after attempt (from 0): doubling
// from MinBackoff (500ms) up to MaxBackoff (8s), half of it jitter.
func (c *Client) backoff(attempt int) time.Duration {
	minB := cmp.Or(max(c.MinBackoff, 0), 500*time.Millisecond)
	maxB := cmp.Or(max(c.MaxBackoff, 0), 8*time.Second)
	d := maxB
	if attempt < 20 && minB<<attempt < maxB { // a larger shift overflows
		d = minB << attempt
	}
	return d/2 + rand.N(d/2+1)
}

// sleepContext sleeps for d, or until ctx ends.
func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// classify reads an error response and turns it into a fault: the kind
// from the status (and the provider's error type), the message from the
// body.
func (c *Client) classify(resp *http.Response) error {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg, errType := "", ""
	if c.ErrorMessage != nil {
		msg, errType = c.ErrorMessage(body)
	} else {
		msg, errType = OpenAIError(body)
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return Classify(c.Provider, resp.StatusCode, errType, msg)
}

// Classify builds the fault of a provider error: from its HTTP status (0
// for an error reported inside a stream) and error type.
func Classify(provider string, status int, errType, msg string) error {
	kind, reason := fault.Unavailable, "PROVIDER_ERROR"
	lower := strings.ToLower(msg + " " + errType)
	for _, c := range errorClasses {
		if slices.Contains(c.statuses, status) || containsAny(lower, c.words) {
			kind, reason = c.kind, c.reason
			break
		}
	}
	detail := fmt.Sprintf("%d %s", status, http.StatusText(status))
	if status == 0 {
		detail = "error in the response stream"
	}
	return fault.New(kind, "%s: %s: %s", provider, detail, msg).
		WithInfo(reason, map[string]string{"provider": provider, "status": strconv.Itoa(status)})
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// errorClasses are the kinds of provider errors, the first that matches
// an error winning: by its HTTP status, or by words in its message and
// error type. Any other error is PROVIDER_ERROR, unavailable.
var errorClasses = []struct {
	kind     fault.Kind
	reason   string
	statuses []int
	words    []string
}{
	{fault.Invalid, "CONTEXT_TOO_LONG", nil, []string{
		"context_length", "context length", "context window", "too many tokens", "prompt is too long", "maximum context", "request_too_large",
		"exceeds the maximum number of tokens", // Gemini: "The input token count (N) exceeds the maximum number of tokens allowed (M)"
	}},
	{fault.Exhausted, "RATE_LIMITED", []int{http.StatusTooManyRequests}, []string{"rate_limit", "resource_exhausted"}},
	{fault.Unavailable, "OVERLOADED", []int{529, http.StatusServiceUnavailable}, []string{"overloaded"}},
	{fault.Unauthenticated, "PROVIDER_AUTHENTICATION", []int{http.StatusUnauthorized}, []string{"authentication"}},
	{fault.Permission, "PROVIDER_PERMISSION", []int{http.StatusForbidden, http.StatusPaymentRequired}, nil},
	{fault.Invalid, "PROVIDER_INVALID_REQUEST", []int{http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge}, []string{"invalid_request"}},
	{fault.Timeout, "PROVIDER_TIMEOUT", []int{http.StatusGatewayTimeout, http.StatusRequestTimeout}, nil},
}

// OpenAIError reads {"error": {"message", "type", "code"}} (OpenAI, Azure,
// DeepSeek, Requesty, OpenRouter), {"error": "message"} (Ollama), and
// {"error": {"message", "status"}} (Gemini).
func OpenAIError(body []byte) (message, errType string) {
	body = bytes.TrimSpace(body)
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Error) == 0 {
		// Whole: Redact shortens messages once secrets are out of them; a
		// cut made here could leave the start of a secret behind.
		return strings.TrimSpace(string(body)), ""
	}
	return ErrorObject(e.Error)
}

// ErrorObject reads the value of an "error" member, as OpenAIError finds
// it in a response body and as streams carry it in an event: a message
// string, or {"message", "type" or "status" or "code"}.
func ErrorObject(raw json.RawMessage) (message, errType string) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, ""
	}
	var obj struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Status  string `json:"status"`
		Code    any    `json:"code"`
	}
	_ = json.Unmarshal(raw, &obj)
	t := obj.Type
	if t == "" {
		t = obj.Status
	}
	if t == "" {
		if c, ok := obj.Code.(string); ok {
			t = c
		}
	}
	return obj.Message, t
}

// MergeOptions adds the agent's provider options to a request body: a key
// the adapter did not set is copied as is (sampling parameters, provider
// features); for the list keys named, the options' entries are appended
// after the adapter's own, so provider-native shapes (an OpenAI "type":
// "mcp" tool, Anthropic "mcp_servers") reach the API untouched. Keys the
// adapter set itself keep the adapter's value.
func MergeOptions(body, options map[string]any, listKeys ...string) {
	for k, v := range options {
		existing, set := body[k]
		if !set {
			body[k] = v
			continue
		}
		if !slices.Contains(listKeys, k) {
			continue
		}
		mine, ok1 := existing.([]any)
		theirs, ok2 := v.([]any)
		if ok1 && ok2 {
			body[k] = append(mine, theirs...)
		}
	}
}

// SetNested sets body[object][key] = v after MergeOptions, so that it
// wins over the options' value: the object the options gave is copied
// first, since the body shares it with the agent's options, which
// adapters must not modify. A value there that is not an object is
// replaced.
func SetNested(body map[string]any, object, key string, v any) {
	inner := map[string]any{}
	if given, ok := body[object].(map[string]any); ok {
		maps.Copy(inner, given)
	}
	inner[key] = v
	body[object] = inner
}
