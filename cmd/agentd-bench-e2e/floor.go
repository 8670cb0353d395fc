package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// floor does a generation's work directly: the requests agentd sent the
// fake, replayed, and the tool calls made with the go-sdk on one session.
// Its methods are safe for concurrent use.
type floor struct {
	url     string
	bodies  [toolTurns + 1][]byte
	http    *http.Client
	session *mcp.ClientSession
	timeout time.Duration
	// The durable floor's record (durableGenerate), and its first step:
	// the generation's request as agentd receives it, encoded.
	steps steps
	start []byte

	// The spawn floor's processes (spawnGenerate), each stopped after its
	// generation without holding up the next, as agentd stops a
	// generation's process after its stream ends; Close waits for them.
	node, everything string
	stopping         sync.WaitGroup
}

// recordedBodies reads, at url, the request bodies the fake recorded
// agentd sending, one per turn.
func (f *floor) recordedBodies(url string) ([]string, error) {
	resp, err := f.http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var bodies []string
	if err := json.NewDecoder(resp.Body).Decode(&bodies); err != nil {
		return nil, fmt.Errorf("the fake's recorded bodies: %w", err)
	}
	return bodies, nil
}

// newFloor fetches the bodies the fake recorded, starts the floor's
// server-everything process and opens the durable floor's record: on
// o.postgres, if set, else in an SQLite file at dbPath. Close stops and
// closes them.
func newFloor(ctx context.Context, o options, baseURL, node, everything, dbPath string) (*floor, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = o.concurrency
	f := &floor{url: baseURL + strings.TrimPrefix(completionsPath, "/v1"), http: &http.Client{Transport: transport}, timeout: o.timeout, node: node, everything: everything}
	if err := f.replay(strings.TrimSuffix(baseURL, "/v1") + bodiesPath); err != nil {
		return nil, err
	}
	var err error
	if f.start, err = proto.Marshal(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: startRequest(sharedServer)}}); err != nil {
		return nil, err
	}
	if f.steps, err = openSteps(ctx, o.postgres, dbPath); err != nil {
		return nil, err
	}
	if f.session, err = f.spawn(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("the floor's server-everything: %w", err), f.steps.Close())
	}
	return f, nil
}

// replay takes the bodies the fake recorded, served at url, as the ones
// the floor sends.
func (f *floor) replay(url string) error {
	bodies, err := f.recordedBodies(url)
	if err != nil {
		return err
	}
	if len(bodies) != len(f.bodies) {
		return fmt.Errorf("the fake recorded %d bodies, want %d", len(bodies), len(f.bodies))
	}
	for i, b := range bodies {
		if b == "" {
			return fmt.Errorf("the fake recorded no request of turn %d", i+1)
		}
		f.bodies[i] = []byte(b)
	}
	return nil
}

// spawn starts a server-everything process and initialises its session.
func (f *floor) spawn(ctx context.Context) (*mcp.ClientSession, error) {
	cmd := exec.Command(f.node, f.everything, "stdio")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// No roots capability, as agentd offers none: a pending roots/list
	// would keep the Node server alive after its stdin closes.
	client := mcp.NewClient(&mcp.Implementation{Name: "agentd-bench-e2e", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	return client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
}

// Close stops the floor's server-everything processes and closes the
// durable floor's record.
func (f *floor) Close() error {
	f.http.CloseIdleConnections()
	f.stopping.Wait()
	return errors.Join(f.session.Close(), f.steps.Close())
}

// generate runs one generation on the floor's one process.
func (f *floor) generate(ctx context.Context) (time.Duration, error) {
	return f.generateOn(ctx, f.session, newRecord(nil))
}

// durableGenerate runs one generation of the durable floor: the floor's,
// on the floor's one process, with its steps committed to its record.
func (f *floor) durableGenerate(ctx context.Context) (time.Duration, error) {
	return f.generateOn(ctx, f.session, newRecord(f.steps))
}

// spawnGenerate runs one generation on a process of its own, spawned and
// initialised for it and stopped after it (in the background): the bound
// that the machine's spawn rate puts on agentd's default mode.
func (f *floor) spawnGenerate(ctx context.Context) (time.Duration, error) {
	sctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	session, err := f.spawn(sctx)
	if err != nil {
		return 0, fmt.Errorf("spawning server-everything: %w", err)
	}
	d, err := f.generateOn(ctx, session, newRecord(nil))
	f.stopping.Go(func() { _ = session.Close() })
	return d, err
}

// generateOn runs one generation on session: each turn's request, its
// stream read to the end and parsed, and the tool call it asked for; and
// rec's steps: the start, a write-ahead before each tool call (which
// holds the call), the end.
func (f *floor) generateOn(ctx context.Context, session *mcp.ClientSession, rec *record) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := rec.start(ctx, f.start); err != nil {
		return 0, err
	}
	var result string
	for turn, body := range f.bodies {
		name, args, text, err := f.complete(ctx, body)
		if err != nil {
			return 0, fmt.Errorf("turn %d: %w", turn+1, err)
		}
		if turn == toolTurns {
			if name != "" || text != finalText {
				return 0, fmt.Errorf("final turn: call %q, text %q", name, text)
			}
			return 0, rec.step(ctx, stepData{Result: result, Text: text})
		}
		if err := rec.step(ctx, stepData{Result: result, Tool: name, Arguments: json.RawMessage(args)}); err != nil {
			return 0, err
		}
		if result, err = callEcho(ctx, session, turn+1, name, args); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// callEcho calls the tool the model asked for in turn, which must echo
// "Echo: turn N", and returns its text.
func callEcho(ctx context.Context, session *mcp.ClientSession, turn int, name, args string) (string, error) {
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		return "", fmt.Errorf("turn %d: %s: %w", turn, name, err)
	}
	want := fmt.Sprintf("Echo: turn %d", turn)
	if res.IsError || len(res.Content) != 1 {
		return "", fmt.Errorf("turn %d: %s answered %d parts, error %v", turn, name, len(res.Content), res.IsError)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != want {
		return "", fmt.Errorf("turn %d: %s answered %v, want %q", turn, name, res.Content[0], want)
	}
	return want, nil
}

// floorChunk is what the floor reads of a chunk.
type floorChunk struct {
	Choices []struct {
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
}

// complete sends one request and reads its stream to [DONE]: the call it
// asks for, if any, and its text.
func (f *floor) complete(ctx context.Context, body []byte) (name, args, text string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(body))
	if err != nil {
		return "", "", "", err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := f.http.Do(req)
	if err != nil {
		return "", "", "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return "", "", "", fmt.Errorf("%s: %s", resp.Status, msg)
	}
	name, args, text, err = readAnswer(bufio.NewReader(resp.Body))
	if err != nil {
		return "", "", "", err
	}
	// Read to the end, so that the connection goes back to the pool.
	_, _ = io.Copy(io.Discard, resp.Body)
	return name, args, text, nil
}

// readAnswer reads a streamed answer up to [DONE]: the name and arguments
// of the tool it calls, and its text.
func readAnswer(r *bufio.Reader) (name, args, text string, err error) {
	var argsB, textB strings.Builder
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // before [DONE]
			}
			return "", "", "", err
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			return name, argsB.String(), textB.String(), nil
		}
		var c floorChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return "", "", "", err
		}
		name = c.add(name, &argsB, &textB)
	}
}

// add adds the chunk's text and tool call fragments to the answer's, and
// returns the tool's name (name, unless the chunk names it).
func (c *floorChunk) add(name string, args, text *strings.Builder) string {
	for _, ch := range c.Choices {
		text.WriteString(ch.Delta.Content)
		for _, tc := range ch.Delta.ToolCalls {
			name = cmp.Or(tc.Function.Name, name)
			args.WriteString(tc.Function.Arguments)
		}
	}
	return name
}
