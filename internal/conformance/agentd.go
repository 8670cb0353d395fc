package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
)

// Agentd is an agentd served in this process for the suite: the default
// configuration on a loopback listener, its state in a directory of its
// own, private networks allowed (the suite's servers listen on
// localhost), no registered MCP server, and the client ID metadata
// document URL the auth/basic-cimd scenario expects (CIMDURL).
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
	cfg.OAuth.ClientMetadataURL = CIMDURL
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
	// Authorizations are the authorization requests the shim answered.
	Authorizations []*agentdv1.AuthorizationRequest
	// Inputs are the input requests the shim answered.
	Inputs []*agentdv1.InputRequest
	// Final is the completed generation's text.
	Final string
}

// Generate runs scenario's generation against the server at url on the
// agentd at addr, to its end, acting as the person where agentd asks one:
// an authorization request is followed to the authorization server's
// redirect (Authorize), and an input request is accepted as it is, with
// no content of its own (so the schema's defaults apply). The stream's
// send side stays open for those answers; a generation that asks nothing
// ends as if it were closed.
func Generate(ctx context.Context, addr, scenario, url string, c Context) (Outcome, error) {
	var out Outcome
	agent, err := Agent(scenario, url, c)
	if err != nil {
		return out, err
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return out, err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream when an answer cannot be given
	stream, err := start(ctx, conn, agent)
	if err != nil {
		return out, err
	}
	err = out.follow(ctx, stream)
	return out, err
}

// start opens a Generate stream and sends the generation's start: agent,
// and the user's "go".
func start(ctx context.Context, conn *grpc.ClientConn, agent *agentdv1.Agent) (agentdv1.AgentService_GenerateClient, error) {
	stream, err := agentdv1.NewAgentServiceClient(conn).Generate(ctx)
	if err != nil {
		return nil, err
	}
	err = stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
		Agent:    agent,
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "go"}}}}},
	}}})
	if err != nil && !errors.Is(err, io.EOF) { // io.EOF: Recv has the status
		return nil, err
	}
	return stream, nil
}

// follow records the stream's events in out, to its end, answering those
// that ask.
func (out *Outcome) follow(ctx context.Context, stream agentdv1.AgentService_GenerateClient) error {
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		answer, err := out.take(ctx, ev)
		if err == nil && answer != nil {
			err = send(stream, answer)
		}
		if err != nil {
			return err
		}
	}
}

// send sends an answer; io.EOF (the stream has ended) is left for Recv,
// which has the status.
func send(stream agentdv1.AgentService_GenerateClient, answer *agentdv1.GenerateRequest) error {
	if err := stream.Send(answer); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// take records ev in out and returns the person's answer to it, if it
// asks for one; a paused generation, or an authorization that fails, is
// an error.
func (out *Outcome) take(ctx context.Context, ev *agentdv1.GenerateResponse) (*agentdv1.GenerateRequest, error) {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_ToolCallFinished:
		out.Calls = append(out.Calls, k.ToolCallFinished)
	case *agentdv1.GenerateResponse_Completed:
		for _, p := range k.Completed.GetMessage().GetParts() {
			out.Final += p.GetText()
		}
	case *agentdv1.GenerateResponse_Paused:
		return nil, fmt.Errorf("the generation paused: %v", k.Paused)
	case *agentdv1.GenerateResponse_AuthorizationRequest:
		return out.authorize(ctx, k.AuthorizationRequest)
	case *agentdv1.GenerateResponse_InputRequest:
		return out.accept(k.InputRequest), nil
	}
	return nil, nil
}

// accept records r and accepts it as it is, with no content of its own
// (so the schema's defaults apply).
func (out *Outcome) accept(r *agentdv1.InputRequest) *agentdv1.GenerateRequest {
	out.Inputs = append(out.Inputs, r)
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_InputResponse{InputResponse: &agentdv1.InputResponse{
		RequestId: r.GetId(), Action: agentdv1.InputAction_INPUT_ACTION_ACCEPT, Content: &structpb.Struct{},
	}}}
}

// authorize records r and follows it to the authorization server's
// redirect, the answer.
func (out *Outcome) authorize(ctx context.Context, r *agentdv1.AuthorizationRequest) (*agentdv1.GenerateRequest, error) {
	out.Authorizations = append(out.Authorizations, r)
	redirect, err := Authorize(ctx, r.GetUrl())
	if err != nil {
		return nil, fmt.Errorf("authorizing at %s: %w", r.GetServerName(), err)
	}
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_AuthorizationResponse{AuthorizationResponse: &agentdv1.AuthorizationResponse{
		RequestId: r.GetId(), RedirectUrl: redirect,
	}}}, nil
}

// Authorize does what the person's browser does with an authorization
// URL: it visits it and returns where the authorization server sends the
// user back (the redirect, with code and state), without following it:
// nothing listens there. The suite's authorization servers approve at
// once.
func Authorize(ctx context.Context, authURL string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return "", err
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		return "", fmt.Errorf("the authorization server answered %s without a redirect", resp.Status)
	}
	return loc.String(), nil
}
