package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// fakeArg, as the only argument, makes this executable the fake model.
const fakeArg = "fake-model"

const (
	// toolTurns is how many turns ask for a tool call; one text turn
	// follows.
	toolTurns = 3
	// apiKey is what agentd sends the fake, and the floor too.
	apiKey = "bench-key"
	// model is the agent's model, echoed in every chunk.
	model = "bench-model"
	// finalText is the fourth turn's answer, in deltas.
	finalText = "All three echoes came back."
	// completionsPath is Chat Completions' path under the base URL
	// "http://<addr>/v1".
	completionsPath = "/v1/chat/completions"
	// bodiesPath serves the first request body of each turn, as JSON
	// strings in turn order (the floor replays them).
	bodiesPath = "/bench/bodies"
	// connsPath serves how many connections the fake has accepted: a
	// client that does not keep its connections dials anew.
	connsPath = "/bench/conns"
)

// serveFakeIfAsked runs the fake model and exits when this process was
// started as `agentd-bench-e2e fake-model`.
func serveFakeIfAsked() {
	if len(os.Args) != 2 || os.Args[1] != fakeArg {
		return
	}
	if err := serveFake(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fake model:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveFake serves the fake model on an ephemeral loopback port, writes
// its base URL as the first line of out, and serves until in ends: the
// parent holds our stdin, so the fake goes when the parent does, whatever
// way it ends.
func serveFake(in io.Reader, out io.Writer) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	f := newFakeModel()
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second, ConnState: f.connState}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	if _, err := fmt.Fprintf(out, "http://%s/v1\n", lis.Addr()); err != nil {
		srv.Close()
		return err
	}
	_, _ = io.Copy(io.Discard, in)
	srv.Close()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// fakeModel is an OpenAI-compatible Chat Completions endpoint that always
// streams. A request holding n tool results gets turn n's answer: a call
// of echo for n < toolTurns, then finalText. The answers are built once,
// so the fake spends its CPU on HTTP and on reading the request alone.
type fakeModel struct {
	answers [toolTurns + 1][][]byte // the SSE events of each turn's answer

	conns atomic.Int64 // accepted

	mu     sync.Mutex
	bodies [toolTurns + 1]string // the first request of each turn
}

func (f *fakeModel) connState(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		f.conns.Add(1)
	}
}

func newFakeModel() *fakeModel {
	f := &fakeModel{}
	for turn := range f.answers {
		f.answers[turn] = sseAnswer(turn)
	}
	return f
}

// sseAnswer is turn's streamed answer, event by event, chunked as OpenAI
// chunks them: the role and the call's name first, the arguments in
// fragments, the finish reason, then usage alone, then [DONE].
func sseAnswer(turn int) [][]byte {
	id := fmt.Sprintf("chatcmpl-bench-%d", turn+1)
	chunk := func(choices, usage string) string {
		return fmt.Sprintf(`data: {"id":%q,"object":"chat.completion.chunk","created":1764500000,"model":%q,"system_fingerprint":"fp_bench","choices":%s,"usage":%s}`+"\n\n",
			id, model, choices, usage)
	}
	delta := func(d, finish string) string {
		return fmt.Sprintf(`[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]`, d, finish)
	}
	var events []string
	finish := `"stop"`
	if turn < toolTurns {
		// The id is a function of the turn, so every generation's requests
		// are the same bytes.
		events = append(events, chunk(delta(fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_%d","type":"function","function":{"name":"echo","arguments":""}}]}`, turn+1), "null"), "null"))
		for _, frag := range []string{`{"mess`, `age": "tur`, fmt.Sprintf(`n %d"}`, turn+1)} {
			args, _ := json.Marshal(frag)
			events = append(events, chunk(delta(fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"arguments":%s}}]}`, args), "null"), "null"))
		}
		finish = `"tool_calls"`
	} else {
		events = append(events, chunk(delta(`{"role":"assistant","content":""}`, "null"), "null"))
		for _, word := range strings.SplitAfter(finalText, " ") {
			text, _ := json.Marshal(word)
			events = append(events, chunk(delta(fmt.Sprintf(`{"content":%s}`, text), "null"), "null"))
		}
	}
	events = append(events, chunk(delta(`{}`, finish), "null"))
	events = append(events, chunk(`[]`, fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":12,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`, 200+40*turn, 212+40*turn)))
	events = append(events, "data: [DONE]\n\n")
	out := make([][]byte, len(events))
	for i, e := range events {
		out[i] = []byte(e)
	}
	return out
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == completionsPath:
		f.complete(w, r)
	case r.Method == http.MethodGet && r.URL.Path == bodiesPath:
		f.mu.Lock()
		bodies := f.bodies
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(bodies[:])
	case r.Method == http.MethodGet && r.URL.Path == connsPath:
		_, _ = fmt.Fprintf(w, "%d\n", f.conns.Load())
	default:
		http.NotFound(w, r)
	}
}

// complete answers one Chat Completions request, streamed: each event is
// flushed on its own, as a provider's arrive.
// requestTurn is the turn a request asks for: how many tool results it
// holds. refusal says why the fake refuses it: not a streamed JSON
// request, or more tool results than the script has turns.
func requestTurn(body []byte) (turn int, refusal string) {
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || !req.Stream {
		return 0, "want a streamed JSON request"
	}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			turn++
		}
	}
	if turn > toolTurns {
		return 0, "too many tool results"
	}
	return turn, ""
}

func (f *fakeModel) complete(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+apiKey {
		http.Error(w, `{"error":{"message":"bad key","type":"invalid_request_error"}}`, http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	turn, refusal := requestTurn(body)
	if refusal != "" {
		http.Error(w, `{"error":{"message":"`+refusal+`","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	if f.bodies[turn] == "" {
		f.bodies[turn] = string(body)
	}
	f.mu.Unlock()
	f.answer(w, turn)
}

// answer streams the script's answer to turn, an event at a time.
func (f *fakeModel) answer(w http.ResponseWriter, turn int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for _, event := range f.answers[turn] {
		if _, err := w.Write(event); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// fakeProcess is the fake model running as a child of this process.
type fakeProcess struct {
	baseURL string // http://127.0.0.1:<port>/v1
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stats   http.Client // keeps its one connection to the fake
}

// startFake starts this executable as the fake model and waits for its
// base URL.
// firstLine is the first line the fake writes, its base URL; "" when
// none comes within 30 s (or ctx ends first). The rest of its output is
// discarded.
func firstLine(ctx context.Context, stdout io.Reader) string {
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		return l
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
	}
	return ""
}

func startFake(ctx context.Context) (*fakeProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, fakeArg)
	// Its own process group, so that an interrupt at the terminal reaches
	// this process alone and the fake stops in order; and killed if we die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	p := &fakeProcess{cmd: cmd}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.baseURL = firstLine(ctx, stdout)
	if !strings.HasPrefix(p.baseURL, "http://") {
		p.stop()
		return nil, fmt.Errorf("the fake model did not start (it said %q)", p.baseURL)
	}
	return p, nil
}

// cpu is the fake's CPU time so far.
func (p *fakeProcess) cpu() (time.Duration, error) {
	t, err := readStat(p.cmd.Process.Pid)
	return t.self, err
}

// conns is how many connections the fake has accepted, counting the one
// this question may open.
func (p *fakeProcess) conns() (int64, error) {
	resp, err := p.stats.Get(strings.TrimSuffix(p.baseURL, "/v1") + connsPath)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var n int64
	if _, err := fmt.Fscan(resp.Body, &n); err != nil {
		return 0, fmt.Errorf("the fake's connections: %w", err)
	}
	return n, nil
}

// stop closes the fake's stdin, which stops it, and kills it if it has
// not gone within five seconds. It may be called once.
func (p *fakeProcess) stop() {
	p.stats.CloseIdleConnections()
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}
