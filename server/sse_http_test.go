package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/httpapi"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/testwait"
	"github.com/agentd/agentd/server"
)

// serveHTTP serves h over HTTP/1.1 on an in-memory listener until the
// test ends, and returns a client of it: in a synctest bubble, unlike a
// socket, it blocks durably, so the bubble's clock moves while the
// client waits.
func serveHTTP(t *testing.T, h http.Handler) *http.Client {
	t.Helper()
	lis := newPipeListener()
	srv := &http.Server{Handler: h}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return lis.dial(ctx) }}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		<-served
	})
	return &http.Client{Transport: tr}
}

// pipeListener is an in-memory net.Listener whose connections are
// net.Pipe's. Not bufconn's: net/http ends a connection's background read
// by setting a read deadline in the past and then clearing it, and
// bufconn's deadline timer may fire after the clearing, failing the
// connection's next read, which cancels the request it carries; net.Pipe
// waits for a stopped deadline's timer.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// dial connects to the listener: the server's end goes to Accept.
func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// transcoded serves svc over HTTP as agentd does (internal/httpapi, over
// its gRPC server), behind a reverse proxy that speaks HTTP/1.1 to it,
// and returns a client of the proxy.
func transcoded(t *testing.T, svc *server.Service) *http.Client {
	t.Helper()
	srv := grpc.NewServer()
	svc.Register(srv)
	t.Cleanup(srv.Stop)
	web, err := httpapi.New(srv, httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	backend := serveHTTP(t, web)
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: "http", Host: "agentd"}) },
		Transport: backend.Transport,
	}
	return serveHTTP(t, proxy)
}

// sseResponse is an event stream being read over HTTP.
type sseResponse struct {
	res  *http.Response
	body *bufio.Reader
	stop context.CancelFunc // drops the connection
}

// getEvents requests GET /v1/generations/{id}/events?after=after, with
// Last-Event-ID lastID unless it is empty.
func getEvents(t *testing.T, client *http.Client, id string, after int64, lastID string) *sseResponse {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://proxy/v1/generations/"+id+"/events?after="+strconv.FormatInt(after, 10), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		t.Fatalf("GET events: %s %s", res.Status, body)
	}
	return &sseResponse{res: res, body: bufio.NewReader(res.Body), stop: stop}
}

// next reads the next block, failing the test at the stream's end.
func (r *sseResponse) next(t *testing.T) sseEvent {
	t.Helper()
	ev, err := readSSE(r.body)
	if err != nil {
		t.Fatalf("reading the event stream: %v", err)
	}
	return ev
}

// Over HTTP/1.1, through vanguard and a reverse proxy, as a browser
// would: POST /v1/generations starts a generation; GET its events is an
// event stream with the headers that keep proxies from buffering it, ids
// that are sequence numbers, kinds, heartbeats that pass the proxy while
// the generation is idle; after a dropped connection, Last-Event-ID (which
// wins over ?after=) resumes exactly after that event, and the stream ends
// after completed. The events are the log's, none missing, none twice.
func TestEventsOverHTTP(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		gates := []chan struct{}{make(chan struct{}), make(chan struct{})}
		st := newStore(t, 0)
		svc := server.New(server.Options{Providers: registryOf(t, gatedTurns(gates...)), Bridge: &fakeBridge{}, Config: config.Default().Generation,
			Checkpoints: st, Generations: st.Generations(), Replica: "replica-a"})
		t.Cleanup(svc.Close)
		client := transcoded(t, svc)
		id := createOverHTTP(t, client, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "gated"}, Messages: userSays("hi")})

		first := getEvents(t, client, id, 0, "")
		for name, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
			if got := first.res.Header.Get(name); got != want {
				t.Errorf("%s: %q; want %q", name, got, want)
			}
		}
		var got []*agentdv1.GenerateResponse
		if ev := first.next(t); ev.Comment != "keepalive" {
			t.Fatalf("the stream opens with %v; want a comment", ev)
		}
		for range 2 { // started, a
			got = append(got, decoded(t, first.next(t)))
		}
		idle := time.Now()
		if ev := first.next(t); ev.Comment != "keepalive" || time.Since(idle) != 15*time.Second {
			t.Errorf("after %v idle: %v; want a heartbeat after 15s", time.Since(idle), ev)
		}
		first.stop()

		close(gates[0]) // b, while nobody follows
		testwait.For(t, "b in the log", func() bool {
			g, err := st.Generations().Get(t.Context(), "", id)
			return err == nil && g.LastSeq >= 3
		})
		// As an EventSource reconnects: the last id it had, and its URL's
		// after, which the header overrides.
		again := getEvents(t, client, id, 0, lastID(got))
		close(gates[1]) // c, and the end, while it follows
		for {
			ev, err := readSSE(again.body)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("reading the resumed stream: %v", err)
			}
			if ev.Comment == "" {
				got = append(got, decoded(t, ev))
			}
		}
		if k := kinds(got); k[len(k)-1] != "completed" {
			t.Errorf("the resumed stream ended after %v; want completed last", k)
		}
		waitForState(t, &pausable{store: st}, id, store.Completed)
		if diff := cmp.Diff(storedEvents(t, &pausable{store: st}, id), got, protocmp.Transform()); diff != "" {
			t.Errorf("the events of both connections differ from the log (-stored +streamed):\n%s", diff)
		}
	})
}

// lastID is the id of the last of events, as an EventSource keeps it.
func lastID(events []*agentdv1.GenerateResponse) string {
	return strconv.FormatInt(events[len(events)-1].GetSequence(), 10)
}

// createOverHTTP starts a generation with POST /v1/generations, whose
// body is the StartGeneration, and returns its id.
func createOverHTTP(t *testing.T, client *http.Client, start *agentdv1.StartGeneration) string {
	t.Helper()
	body, err := protojson.Marshal(start)
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Post("http://proxy/v1/generations", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	data, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/generations: %s %s %v", res.Status, data, err)
	}
	var created agentdv1.CreateGenerationResponse
	if err := protojson.Unmarshal(data, &created); err != nil {
		t.Fatalf("POST /v1/generations answered %s: %v", data, err)
	}
	if created.GetFirstSequence() != 1 {
		t.Errorf("created %v; want first_sequence 1", &created)
	}
	return created.GetGenerationId()
}

// Over HTTP, an event stream that cannot begin answers the HTTP
// status of its code and the google.rpc.Status as JSON, as the
// transcoded routes do: 404 for a generation the caller's tenant does
// not have, 400 for an after that is not a sequence number.
func TestEventsOverHTTPErrors(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	svc := server.New(server.Options{Providers: registryOf(t, recordingScript()), Bridge: &fakeBridge{}, Config: config.Default().Generation,
		Checkpoints: st, Generations: st.Generations(), Replica: "replica-a"})
	t.Cleanup(svc.Close)
	client := transcoded(t, svc)
	for _, tc := range []struct {
		path string
		code int
		want *spb.Status
	}{
		{"/v1/generations/gen_unknown/events", http.StatusNotFound, &spb.Status{Code: int32(codes.NotFound), Message: `no generation "gen_unknown"`}},
		{"/v1/generations/gen_unknown/events?after=x", http.StatusBadRequest, nil},
	} {
		res, err := client.Get("http://proxy" + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		var got spb.Status
		if err := protojson.Unmarshal(body, &got); err != nil || res.StatusCode != tc.code || res.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %s %s %s (%v); want %d and a JSON status", tc.path, res.Status, res.Header.Get("Content-Type"), body, err, tc.code)
			continue
		}
		if tc.want == nil {
			wantCode(t, status.FromProto(&got), codes.InvalidArgument)
			if diff := cmp.Diff([]string{"after"}, violationFields(status.FromProto(&got))); diff != "" {
				t.Errorf("GET %s: violations (-want +got):\n%s", tc.path, diff)
			}
		} else if diff := cmp.Diff(tc.want, &got, protocmp.Transform()); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", tc.path, diff)
		}
	}
}
