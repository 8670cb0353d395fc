// Command chat is a chat on a thread that agentd remembers: each line of
// its standard input is a user message, answered on one thread whose id
// it keeps in a file, so that the next run continues the conversation,
// even against an agentd restarted since:
//
//	go run ./examples/go/chat [flags] [address]
//
// --state names the file (default chat-thread.txt): without it, the
// example creates a thread and writes its id there. Each generation sends
// only the new line: agentd adds the thread's items before it. At the end
// the example lists the thread's items. The agent is the "mock" provider,
// which answers "Mock response to: <the line>"; put yours in agent. The
// other flags (--token, --tls-ca, --tls-cert, --tls-key) are every
// example's: see examples/go/internal/connect.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/agentd/agentd/examples/go/internal/connect"
	"github.com/agentd/agentd/examples/go/internal/reconnect"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// agent answers every line; it has no tools, so nothing needs approving.
var agent = &agentdv1.Agent{Provider: "mock", Instructions: "You are a friendly chat agent."}

// endUser is the application's id of the person chatting, kept in the
// thread's metadata (ListThreads finds a person's threads by it).
const endUser = "user-1"

func main() {
	state := flag.String("state", "chat-thread.txt", "the file that keeps the thread's id")
	o, _ := connect.Parse("")
	if err := run(o, *state, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "go chat example:", o.Explain(err))
		os.Exit(1)
	}
}

func run(o connect.Options, state string, in io.Reader, out io.Writer) error {
	conn, err := o.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	client := agentdv1.NewAgentServiceClient(conn)
	ctx := context.Background()
	id, err := thread(ctx, client, state, out)
	if err != nil {
		return err
	}
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		if err := say(ctx, client, id, lines.Text(), out); err != nil {
			return err
		}
	}
	if err := lines.Err(); err != nil {
		return err
	}
	return printItems(ctx, client, id, out)
}

// thread returns the id of the thread kept in the file state, or of a
// new one, which it writes there.
func thread(ctx context.Context, client agentdv1.AgentServiceClient, state string, out io.Writer) (string, error) {
	data, err := os.ReadFile(state)
	if errors.Is(err, fs.ErrNotExist) {
		return newThread(ctx, client, state, out)
	}
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(data))
	resp, err := client.GetThread(ctx, &agentdv1.GetThreadRequest{ThreadId: id})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(out, "continuing %s (%d items)\n", id, resp.GetThread().GetItemCount())
	return id, nil
}

func newThread(ctx context.Context, client agentdv1.AgentServiceClient, state string, out io.Writer) (string, error) {
	resp, err := client.CreateThread(ctx, &agentdv1.CreateThreadRequest{Metadata: map[string]string{"end_user": endUser}})
	if err != nil {
		return "", err
	}
	id := resp.GetThread().GetThreadId()
	fmt.Fprintln(out, "created", id)
	return id, os.WriteFile(state, []byte(id+"\n"), 0o600)
}

// say runs a generation on the thread with line as the user's message
// and prints its text as it streams. (A UI would also take back the text
// of a turn_withdrawn, as examples/go/main.go does with reconnect.Text.)
func say(ctx context.Context, client agentdv1.AgentServiceClient, id, line string, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := &agentdv1.StartGeneration{Agent: agent, ThreadId: id, Messages: []*agentdv1.Message{{
		Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: line}}},
	}}}
	fmt.Fprint(out, "agent: ")
	first := &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}
	for ev, err := range reconnect.Default.Generate(ctx, client, first) {
		if err != nil {
			return err
		}
		switch k := ev.GetEvent().(type) {
		case *agentdv1.GenerateResponse_TextDelta:
			fmt.Fprint(out, k.TextDelta.GetText())
		case *agentdv1.GenerateResponse_Completed:
			fmt.Fprintln(out)
		}
	}
	return nil
}

// printItems prints the thread's items, oldest first, page by page.
func printItems(ctx context.Context, client agentdv1.AgentServiceClient, id string, out io.Writer) error {
	req := &agentdv1.ListThreadItemsRequest{ThreadId: id}
	fmt.Fprintln(out, "the thread holds:")
	for {
		page, err := client.ListThreadItems(ctx, req)
		if err != nil {
			return err
		}
		for _, item := range page.GetItems() {
			role := strings.ToLower(strings.TrimPrefix(item.GetMessage().GetRole().String(), "ROLE_"))
			fmt.Fprintf(out, "  %d %s: %s\n", item.GetPosition(), role, connect.Text(item.GetMessage()))
		}
		if page.GetNextPageToken() == "" {
			return nil
		}
		req.PageToken = page.GetNextPageToken()
	}
}
