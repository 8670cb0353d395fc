package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
)

// Agentd is an agentd served in this process for the suite: the default
// configuration on a loopback listener, its state in a directory of its
// own, private networks allowed (the suite's servers listen on
// localhost), no registered MCP server.
type Agentd struct {
	Addr   string
	cancel context.CancelFunc
	done   chan error
	dir    string
}

// StartAgentd starts agentd; logs go to log at warning level and above.
func StartAgentd(log io.Writer) (*Agentd, error) {
	dir, err := os.MkdirTemp("", "agentd-conformance-")
	if err != nil {
		return nil, err
	}
	cfg := config.Default()
	cfg.StateDir = dir
	cfg.ShutdownDrain = 0
	cfg.Bridge.AllowPrivateNetworks = true
	cfg.Bridge.Servers = nil // no built-in demo server: this process is not agentd's binary
	o := app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	a, err := app.NewAgent(o)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Agentd{Addr: lis.Addr().String(), cancel: cancel, done: make(chan error, 1), dir: dir}
	go func() { d.done <- a.Serve(ctx, lis, o) }()
	return d, nil
}

// Stop stops agentd, waits for it and removes its state.
func (d *Agentd) Stop() error {
	d.cancel()
	err := <-d.done
	return errors.Join(err, os.RemoveAll(d.dir))
}

// Outcome is what a generation came to, for the shim's output.
type Outcome struct {
	// Calls are the tool calls' finished events.
	Calls []*agentdv1.ToolCallFinished
	// Final is the completed generation's text.
	Final string
}

// Generate runs scenario's generation against the server at url on the
// agentd at addr, to its end.
func Generate(ctx context.Context, addr, scenario, url string) (Outcome, error) {
	var out Outcome
	agent, err := Agent(scenario, url)
	if err != nil {
		return out, err
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return out, err
	}
	defer conn.Close()
	stream, err := agentdv1.NewAgentServiceClient(conn).Generate(ctx)
	if err != nil {
		return out, err
	}
	err = stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
		Agent:    agent,
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "go"}}}}},
	}}})
	if err != nil && !errors.Is(err, io.EOF) { // io.EOF: Recv has the status
		return out, err
	}
	if err := stream.CloseSend(); err != nil {
		return out, err
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if f := ev.GetToolCallFinished(); f != nil {
			out.Calls = append(out.Calls, f)
		}
		if c := ev.GetCompleted(); c != nil {
			for _, p := range c.GetMessage().GetParts() {
				out.Final += p.GetText()
			}
		}
		if p := ev.GetPaused(); p != nil {
			return out, fmt.Errorf("the generation paused: %v", p)
		}
	}
}
