package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// lines reads the person's answers, one line at a time, in a goroutine of
// its own started at the first question: a question may then be answered
// by something else (the browser's redirect) while a read is pending, and
// the line typed later answers the next question instead of being lost.
type lines struct {
	r    *bufio.Reader
	once sync.Once
	c    chan line
	done <-chan struct{}
}

type line struct {
	text string
	ok   bool // false: the input ended
}

func newLines(r io.Reader, done <-chan struct{}) *lines {
	return &lines{r: bufio.NewReader(r), c: make(chan line), done: done}
}

// next is where the next line arrives. Only generate's goroutine calls
// it; the reader stops at the end of the input or when done is closed.
func (l *lines) next() <-chan line {
	l.once.Do(func() { go l.read() })
	return l.c
}

// read sends each line read to the questions until the input ends; the
// end of the input then answers every later question too.
func (l *lines) read() {
	for {
		s, err := l.r.ReadString('\n')
		ln := line{text: strings.TrimSpace(s), ok: err == nil || s != ""}
		select {
		case l.c <- ln:
		case <-l.done:
			return
		}
		if err != nil {
			l.ended()
			return
		}
	}
}

// ended answers every later question with the end of the input, until
// done is closed.
func (l *lines) ended() {
	for {
		select {
		case l.c <- line{}:
		case <-l.done:
			return
		}
	}
}

// loopbackRedirect is the redirect target of the authorization URL raw (its
// redirect_uri) when agentd generate can catch the redirect itself: an http
// URL on 127.0.0.1, localhost or [::1] with a port.
func loopbackRedirect(raw string) (*url.URL, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, false
	}
	target, err := url.Parse(u.Query().Get("redirect_uri"))
	if err != nil || target.Scheme != "http" || target.Port() == "" || target.User != nil || !slices.Contains(loopbackHosts, target.Hostname()) {
		return nil, false
	}
	return target, true
}

// loopbackHosts are the hosts of a loopback redirect target.
var loopbackHosts = []string{"127.0.0.1", "localhost", "::1"}

// closePage is what the browser shows once its redirect is caught.
const closePage = `<!doctype html>
<html><head><meta charset="utf-8"><title>agentd</title></head>
<body><p>agentd received the authorization. You may close this page.</p></body></html>
`

// redirectCatcher listens at a loopback redirect target for the one
// redirect of an authorization: a request to the target's path whose state
// is the authorization URL's.
type redirectCatcher struct {
	srv  *http.Server
	got  chan string
	wg   sync.WaitGroup
	once sync.Once
}

// catchRedirect listens at target (localhost: on 127.0.0.1 and, where it
// can, [::1], as a browser may resolve it to either) for a redirect
// carrying state (any state when the authorization URL has none). Close
// stops it.
func catchRedirect(target *url.URL, state string) (*redirectCatcher, error) {
	listeners, err := listenLoopback(target)
	if err != nil {
		return nil, err
	}
	c := &redirectCatcher{got: make(chan string, 1)}
	c.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: c.handler(target, state)}
	for _, lis := range listeners {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.srv.Serve(lis)
		}()
	}
	return c, nil
}

// listenLoopback listens at target's port on its host, or for localhost
// on 127.0.0.1 and, where there is one, [::1].
func listenLoopback(target *url.URL) ([]net.Listener, error) {
	hosts := []string{target.Hostname()}
	if hosts[0] == "localhost" {
		hosts = []string{"127.0.0.1", "::1"}
	}
	var listeners []net.Listener
	for i, h := range hosts {
		lis, err := net.Listen("tcp", net.JoinHostPort(h, target.Port()))
		if err != nil {
			if i == 0 {
				return nil, err
			}
			continue // no IPv6 loopback here: 127.0.0.1 will do
		}
		listeners = append(listeners, lis)
	}
	return listeners, nil
}

// handler takes the first redirect to target's path that carries state
// (any, when state is "") and a code or an error, and shows the browser
// closePage; it refuses any other request.
func (c *redirectCatcher) handler(target *url.URL, state string) http.Handler {
	path := cmp.Or(target.EscapedPath(), "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isRedirect(r, path, state) {
			http.Error(w, "agentd is waiting for another authorization's redirect", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, closePage)
		redirect := *target
		redirect.RawQuery = r.URL.RawQuery
		redirect.Fragment = ""
		select {
		case c.got <- redirect.String():
		default: // a second redirect: the first one answers
		}
	})
}

// isRedirect reports whether r is the authorization's redirect: to path,
// with state (when there is one), and a code or an error.
func isRedirect(r *http.Request, path, state string) bool {
	q := r.URL.Query()
	return r.URL.EscapedPath() == path && (state == "" || q.Get("state") == state) && (q.Get("code") != "" || q.Get("error") != "")
}

// Close stops listening, letting the page being sent finish first, and
// waits for the server's goroutines. It may be called more than once.
func (c *redirectCatcher) Close() {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if c.srv.Shutdown(ctx) != nil {
			c.srv.Close()
		}
		c.wg.Wait()
	})
}

// authorize asks the person for the redirect that ends the authorization
// r asks for: the URL they paste, or, when r's redirect target is a
// loopback http URL, the browser's redirect to it, caught there, whichever
// comes first. An empty line asks again. ok is false when the input ended
// (or ctx did) first.
func authorize(ctx context.Context, r *agentdv1.AuthorizationRequest, in *lines, prompt io.Writer) (string, bool) {
	var caught <-chan string
	where := ""
	if c, target := catchLoopbackRedirect(r.GetUrl(), prompt); c != nil {
		defer c.Close()
		caught = c.got
		where = " (or finish in a browser on this machine: agentd generate is listening at " + target.Host + ")"
	}
	for {
		fmt.Fprintf(prompt, "open the URL above, authorize, and paste the URL the browser is sent back to%s: ", where)
		select {
		case u := <-caught:
			fmt.Fprintln(prompt, "\nthe browser's redirect arrived")
			return u, true
		case ln := <-in.next():
			if !ln.ok {
				fmt.Fprintln(prompt)
				return "", false
			}
			if ln.text != "" {
				return ln.text, true
			}
		case <-ctx.Done():
			return "", false
		}
	}
}

// catchLoopbackRedirect catches the redirect of the authorization URL raw
// when it is to a loopback http URL, which it returns; nil when it is not,
// or when it cannot listen there (which it tells the person).
func catchLoopbackRedirect(raw string, prompt io.Writer) (*redirectCatcher, *url.URL) {
	target, ok := loopbackRedirect(raw)
	if !ok {
		return nil, nil
	}
	state := ""
	if u, err := url.Parse(raw); err == nil {
		state = u.Query().Get("state")
	}
	c, err := catchRedirect(target, state)
	if err != nil {
		fmt.Fprintf(prompt, "cannot catch the redirect (%v): paste it instead\n", err)
		return nil, nil
	}
	return c, target
}

// askInput asks the person to answer an MCP server's request for input:
// for a form, a JSON object (checked against the schema by agentd), for a
// web page, Enter once they are done there; "decline" or "cancel" instead
// refuse or dismiss it. A form answer that is not a JSON object asks
// again. ok is false when the input ended (or ctx did) first.
func askInput(ctx context.Context, r *agentdv1.InputRequest, in *lines, prompt io.Writer) (*agentdv1.InputResponse, bool) {
	question := "open the URL above; press Enter when done there, or type decline or cancel: "
	if r.GetMode() != agentdv1.InputMode_INPUT_MODE_URL {
		schema, _ := protojson.Marshal(r.GetRequestedSchema())
		question = fmt.Sprintf("answer with a JSON object of %s, or type decline or cancel: ", schema)
	}
	for {
		text, ok := ask(ctx, in, prompt, question)
		if !ok {
			return nil, false
		}
		resp, err := inputAnswer(r, text)
		if err != nil {
			fmt.Fprintf(prompt, "not a JSON object: %v\n", err)
			continue
		}
		return resp, true
	}
}

// inputAnswer reads the person's answer text to r: decline, cancel, or
// accept, with a form's JSON object ("" is {}).
func inputAnswer(r *agentdv1.InputRequest, text string) (*agentdv1.InputResponse, error) {
	resp := &agentdv1.InputResponse{RequestId: r.GetId(), Action: agentdv1.InputAction_INPUT_ACTION_ACCEPT}
	action, refused := refusals[strings.ToLower(text)]
	switch {
	case refused:
		resp.Action = action
	case r.GetMode() != agentdv1.InputMode_INPUT_MODE_URL:
		resp.Content = &structpb.Struct{}
		if err := protojson.Unmarshal([]byte(cmp.Or(text, "{}")), resp.Content); err != nil {
			return nil, err
		}
	}
	return resp, nil
}
