// Command oauth runs a generation whose MCP server requires OAuth, and has
// its user authorize agentd there:
//
//	go run ./examples/go/oauth [flags] [address] [request.json]
//
// The agent in examples/oauth-start.json declares a url MCP server with an
// empty oauth block: agentd is the server's OAuth client (it discovers the
// authorization server, registers or uses its client ID metadata document,
// and keeps the tokens per end user). Replace its url with your server's.
// When agentd holds no token for the end user, it sends an
// AuthorizationRequest and waits on the stream; this client prints the
// URL, reads back the URL the browser was sent to after authorizing (its
// query has the code and state), and answers with an
// AuthorizationResponse. agentd exchanges the code and the generation goes
// on; a later generation for the same end user is not asked again. Its
// flags (--token, --tls-ca, --tls-cert, --tls-key) are every example's:
// see examples/go/internal/connect.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentd/agentd/examples/go/internal/connect"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

func main() {
	o, file := connect.Parse("examples/oauth-start.json")
	if err := run(o, file, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "go oauth example:", o.Explain(err))
		os.Exit(1)
	}
}

func run(o connect.Options, file string, stdin io.Reader, stdout io.Writer) error {
	start, err := connect.ReadStart(file)
	if err != nil {
		return err
	}
	conn, err := o.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	// A person authorizes: give them time.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stream, err := connect.Start(ctx, conn, start)
	if err != nil {
		return err
	}
	p := person{stream: stream, answers: bufio.NewScanner(stdin), out: stdout}
	if err := connect.Each(stream, p.handle); err != nil {
		return err
	}
	if !p.completed {
		return errors.New("the generation did not complete")
	}
	return nil
}

// person is the user at the terminal: shown the events, asked to
// authorize, answering with what they paste.
type person struct {
	stream    agentdv1.AgentService_GenerateClient
	answers   *bufio.Scanner
	out       io.Writer
	completed bool
}

// handle prints ev, and has the person answer it if it is an
// authorization request.
func (p *person) handle(ev *agentdv1.GenerateResponse) error {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_Started:
		var tools []string
		for _, t := range k.Started.GetTools() {
			tools = append(tools, t.GetName())
		}
		fmt.Fprintln(p.out, "started", k.Started.GetGenerationId(), "tools:", strings.Join(tools, ", "))
	case *agentdv1.GenerateResponse_AuthorizationRequest:
		return p.authorize(k.AuthorizationRequest)
	case *agentdv1.GenerateResponse_ToolCallFinished:
		fmt.Fprintln(p.out, "tool_call_finished", k.ToolCallFinished.GetToolName(), k.ToolCallFinished.GetOutput())
	case *agentdv1.GenerateResponse_Completed:
		fmt.Fprintln(p.out, "completed", connect.Text(k.Completed.GetMessage()))
		p.completed = true
	}
	return nil
}

// authorize shows the authorization URL and answers with the URL the
// person pastes; with no answer it half-closes, and agentd ends (or
// pauses) the generation.
func (p *person) authorize(r *agentdv1.AuthorizationRequest) error {
	fmt.Fprintf(p.out, "authorization_request from %s (scopes %s): open this URL and authorize:\n  %s\n", r.GetServerName(), strings.Join(r.GetScopes(), " "), r.GetUrl())
	fmt.Fprint(p.out, "then paste the URL your browser was sent to: ")
	if !p.answers.Scan() {
		return p.stream.CloseSend()
	}
	return p.stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_AuthorizationResponse{AuthorizationResponse: &agentdv1.AuthorizationResponse{
		RequestId: r.GetId(), RedirectUrl: strings.TrimSpace(p.answers.Text()),
	}}})
}
