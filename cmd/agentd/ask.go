package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
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
	l.once.Do(func() {
		go func() {
			for {
				s, err := l.r.ReadString('\n')
				ln := line{text: strings.TrimSpace(s), ok: err == nil || s != ""}
				select {
				case l.c <- ln:
				case <-l.done:
					return
				}
				if err != nil {
					// The end of the input answers every later question too.
					for {
						select {
						case l.c <- line{}:
						case <-l.done:
							return
						}
					}
				}
			}
		}()
	})
	return l.c
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
	if err != nil || target.Scheme != "http" || target.Port() == "" || target.User != nil {
		return nil, false
	}
	switch target.Hostname() {
	case "127.0.0.1", "localhost", "::1":
		return target, true
	}
	return nil, false
}

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
	c := &redirectCatcher{got: make(chan string, 1)}
	path := target.EscapedPath()
	if path == "" {
		path = "/"
	}
	c.srv = &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			if r.URL.EscapedPath() != path || (state != "" && q.Get("state") != state) || (q.Get("code") == "" && q.Get("error") == "") {
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
		}),
	}
	for _, lis := range listeners {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.srv.Serve(lis)
		}()
	}
	return c, nil
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
	if target, ok := loopbackRedirect(r.GetUrl()); ok {
		state := ""
		if u, err := url.Parse(r.GetUrl()); err == nil {
			state = u.Query().Get("state")
		}
		c, err := catchRedirect(target, state)
		if err != nil {
			fmt.Fprintf(prompt, "cannot catch the redirect (%v): paste it instead\n", err)
		} else {
			defer c.Close()
			caught = c.got
			where = " (or finish in a browser on this machine: agentd generate is listening at " + target.Host + ")"
		}
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
		resp := &agentdv1.InputResponse{RequestId: r.GetId(), Action: agentdv1.InputAction_INPUT_ACTION_ACCEPT}
		switch {
		case strings.EqualFold(text, "decline"):
			resp.Action = agentdv1.InputAction_INPUT_ACTION_DECLINE
		case strings.EqualFold(text, "cancel"):
			resp.Action = agentdv1.InputAction_INPUT_ACTION_CANCEL
		case r.GetMode() == agentdv1.InputMode_INPUT_MODE_URL:
		default:
			content := &structpb.Struct{}
			if text == "" {
				text = "{}"
			}
			if err := protojson.Unmarshal([]byte(text), content); err != nil {
				fmt.Fprintf(prompt, "not a JSON object: %v\n", err)
				continue
			}
			resp.Content = content
		}
		return resp, true
	}
}
