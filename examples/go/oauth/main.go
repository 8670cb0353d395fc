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

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentd/agentd/examples/go/internal/connect"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

func main() {
	o, file := connect.Parse("examples/oauth-start.json")
	if err := run(o, file, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "go oauth example:", err)
		os.Exit(1)
	}
}

func run(o connect.Options, file string, stdin io.Reader, stdout io.Writer) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	start := &agentdv1.StartGeneration{}
	if err := protojson.Unmarshal(data, start); err != nil {
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
	stream, err := agentdv1.NewAgentServiceClient(conn).Generate(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil {
		return err
	}
	answers := bufio.NewScanner(stdin)
	completed := false
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch k := ev.GetEvent().(type) {
		case *agentdv1.GenerateResponse_Started:
			var tools []string
			for _, t := range k.Started.GetTools() {
				tools = append(tools, t.GetName())
			}
			fmt.Fprintln(stdout, "started", k.Started.GetGenerationId(), "tools:", strings.Join(tools, ", "))
		case *agentdv1.GenerateResponse_AuthorizationRequest:
			r := k.AuthorizationRequest
			fmt.Fprintf(stdout, "authorization_request from %s (scopes %s): open this URL and authorize:\n  %s\n", r.GetServerName(), strings.Join(r.GetScopes(), " "), r.GetUrl())
			fmt.Fprint(stdout, "then paste the URL your browser was sent to: ")
			if !answers.Scan() {
				// No answer: half-close, and agentd ends (or pauses) the generation.
				if err := stream.CloseSend(); err != nil {
					return err
				}
				continue
			}
			if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_AuthorizationResponse{AuthorizationResponse: &agentdv1.AuthorizationResponse{
				RequestId: r.GetId(), RedirectUrl: strings.TrimSpace(answers.Text()),
			}}}); err != nil {
				return err
			}
		case *agentdv1.GenerateResponse_ToolCallFinished:
			fmt.Fprintln(stdout, "tool_call_finished", k.ToolCallFinished.GetToolName(), k.ToolCallFinished.GetOutput())
		case *agentdv1.GenerateResponse_Completed:
			var final string
			for _, p := range k.Completed.GetMessage().GetParts() {
				final += p.GetText()
			}
			fmt.Fprintln(stdout, "completed", final)
			completed = true
		}
	}
	if !completed {
		return errors.New("the generation did not complete")
	}
	return nil
}
