package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

const threadsUsage = `usage: agentd threads list|get|delete [flags]

Shows and deletes the threads agentd keeps for you (for your tenant):
the conversations it remembers, which agentd chat and a start with a
thread_id continue.

  agentd threads list        the threads, newest first
  agentd threads get ID      one thread; with --items its conversation too
  agentd threads delete ID   delete a thread, its items and its generations

examples:
  agentd threads list --metadata end_user=alice
  agentd threads get thr_0193a5b2c4d6e8f0a1b2c3d4e5f60718 --items
  agentd threads delete thr_0193a5b2c4d6e8f0a1b2c3d4e5f60718
`

// threadCommands are agentd threads' subcommands.
var threadCommands = map[string]func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error{
	"list":   threadsList,
	"get":    threadsGet,
	"delete": threadsDelete,
}

// threads runs `agentd threads`: the subcommand args[0] names.
func threads(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		if sub, ok := threadCommands[args[0]]; ok {
			return sub(ctx, args[1:], getenv, stdout, stderr)
		}
	}
	if _, err := parseFlags(newFlagSet("agentd threads", threadsUsage), args, stdout); err != nil {
		return err
	}
	return errors.New(`want list, get ID or delete ID after agentd threads ("agentd threads -h" shows them)`)
}

const threadsListUsage = `usage: agentd threads list [flags]

Prints a page of your threads, newest first, one a line:
id, when it was created, how many items it holds, the generation that
holds it now (and how many are queued behind it), its metadata.
--metadata keeps the threads whose metadata has every entry given. When
there are more, it prints the command that lists the next page. --json
prints one Thread message a line.

examples:
  agentd threads list
  agentd threads list --metadata end_user=alice --page-size 10
` + clientUsage

// threadsList runs `agentd threads list`.
func threadsList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c clientFlags
	req := &agentdv1.ListThreadsRequest{}
	fs := newFlagSet("agentd threads list", threadsListUsage)
	c.register(fs)
	fs.Var((*metadataFlag)(&req.Metadata), "metadata", "only threads whose metadata has this `KEY=VALUE` (repeatable)")
	pageSize := fs.Int("page-size", 0, "at most `N` threads (0: agentd's default, 50; at most 1000)")
	fs.StringVar(&req.PageToken, "page-token", "", "the page after the last one's, as its command to list the next page gives it")
	positional, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(positional) > 0 || *pageSize < 0 || *pageSize > 1000 {
		return errors.New(`agentd threads list takes flags only, and --page-size from 0 to 1000 ("agentd threads list -h" shows them)`)
	}
	c.fromEnv(fs, getenv)
	req.PageSize = int32(*pageSize)
	p := c.printing(stdout, stderr)
	return c.call(ctx, func(ctx context.Context, client agentdv1.AgentServiceClient) error {
		res, err := client.ListThreads(ctx, req)
		if err != nil {
			return err
		}
		p.threads(res.GetThreads())
		if next := res.GetNextPageToken(); next != "" {
			p.note("(more: %s)", p.next.command("threads", nextPageArgs(req, next)...))
		}
		return nil
	})
}

// nextPageArgs are the arguments of agentd threads that list the page
// after req's, whose token is next.
func nextPageArgs(req *agentdv1.ListThreadsRequest, next string) []string {
	args := []string{"list"}
	for _, entry := range entries(req.GetMetadata()) {
		args = append(args, "--metadata", entry)
	}
	if req.GetPageSize() > 0 {
		args = append(args, "--page-size", strconv.Itoa(int(req.GetPageSize())))
	}
	return append(args, "--page-token", next)
}

// threads prints threads, a table for a person.
func (p *printer) threads(threads []*agentdv1.Thread) {
	if p.asJSON {
		for _, t := range threads {
			p.json(t)
		}
		return
	}
	if len(threads) == 0 {
		p.line("no threads")
		return
	}
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCREATED\tITEMS\tACTIVE\tMETADATA")
	for _, t := range threads {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", t.GetThreadId(), localTime(t.GetCreatedAt().AsTime()), t.GetItemCount(),
			cmp.Or(active(t), "-"), cmp.Or(strings.Join(entries(t.GetMetadata()), ", "), "-"))
	}
	tw.Flush()
}

// active is the generation that holds t, and how many are queued behind
// it; "" when none does.
func active(t *agentdv1.Thread) string {
	id := t.GetActiveGenerationId()
	if n := len(t.GetQueuedGenerationIds()); n > 0 {
		id += fmt.Sprintf(" (+%d queued)", n)
	}
	return id
}

const threadsGetUsage = `usage: agentd threads get ID [flags]

Prints one thread: when it was created, last changed and expires, how
many items it holds, the generation that holds it now and those queued
behind it, its metadata. --items prints its items too, oldest first, as
the conversation they are (every page of them). --json prints the Thread
message, then, with --items, one ThreadItem a line.

examples:
  agentd threads get thr_0193a5b2c4d6e8f0a1b2c3d4e5f60718
  agentd threads get thr_0193a5b2c4d6e8f0a1b2c3d4e5f60718 --items
` + clientUsage

// threadItemsPageSize is the page get --items reads: ListThreadItems'
// most.
const threadItemsPageSize = 1000

// threadsGet runs `agentd threads get`.
func threadsGet(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := newFlagSet("agentd threads get", threadsGetUsage)
	c.register(fs)
	withItems := fs.Bool("items", false, "print the thread's items too, oldest first")
	id, err := c.parseWithID(fs, "thread", args, getenv, stdout)
	if err != nil {
		return err
	}
	p := c.printing(stdout, stderr)
	return c.call(ctx, func(ctx context.Context, client agentdv1.AgentServiceClient) error {
		res, err := client.GetThread(ctx, &agentdv1.GetThreadRequest{ThreadId: id})
		if err != nil {
			return err
		}
		p.thread(res.GetThread())
		if !*withItems {
			return nil
		}
		return eachItemsPage(ctx, client, id, p.items)
	})
}

// eachItemsPage reads thread id's items, oldest first, and gives each page
// to do.
func eachItemsPage(ctx context.Context, client agentdv1.AgentServiceClient, id string, do func([]*agentdv1.ThreadItem)) error {
	req := &agentdv1.ListThreadItemsRequest{ThreadId: id, PageSize: threadItemsPageSize}
	for {
		res, err := client.ListThreadItems(ctx, req)
		if err != nil {
			return err
		}
		do(res.GetItems())
		if req.PageToken = res.GetNextPageToken(); req.PageToken == "" {
			return nil
		}
	}
}

// thread prints t for a person, or as JSON.
func (p *printer) thread(t *agentdv1.Thread) {
	if p.asJSON {
		p.json(t)
		return
	}
	p.line("%s", t.GetThreadId())
	p.line("  created:  %s", localTime(t.GetCreatedAt().AsTime()))
	p.line("  updated:  %s", localTime(t.GetUpdatedAt().AsTime()))
	if t.GetExpiresAt() != nil {
		p.line("  expires:  %s", localTime(t.GetExpiresAt().AsTime()))
	}
	p.line("  items:    %d", t.GetItemCount())
	if a := t.GetActiveGenerationId(); a != "" {
		p.line("  active:   %s", a)
	}
	if q := t.GetQueuedGenerationIds(); len(q) > 0 {
		p.line("  queued:   %s", strings.Join(q, ", "))
	}
	if m := t.GetMetadata(); len(m) > 0 {
		p.line("  metadata: %s", strings.Join(entries(m), ", "))
	}
}

// items prints thread items as the conversation they are: a line for each
// part of each message, after who said it; or one ThreadItem a line, as
// JSON.
func (p *printer) items(items []*agentdv1.ThreadItem) {
	for _, it := range items {
		if p.asJSON {
			p.json(it)
			continue
		}
		who := enumWord(it.GetMessage().GetRole().String(), "ROLE_")
		for _, part := range it.GetMessage().GetParts() {
			if text := partText(part); text != "" {
				p.line("%s: %s", who, text)
			}
		}
	}
}

// partText is part for a person, as the events of its making print it;
// "" for reasoning the provider withheld.
func partText(part *agentdv1.Part) string {
	switch k := part.GetKind().(type) {
	case *agentdv1.Part_ToolCall:
		return fmt.Sprintf("tool call %s %s", k.ToolCall.GetName(), k.ToolCall.GetArguments())
	case *agentdv1.Part_ToolResult:
		r := k.ToolResult
		return fmt.Sprintf("tool result %s (%s): %s", r.GetName(), outcome(r.GetIsError()), r.GetOutput())
	case *agentdv1.Part_ProviderToolCall:
		c := k.ProviderToolCall
		return fmt.Sprintf("provider tool call %s%s: %s", c.GetToolName(), onServer(c.GetServerName()), c.GetOutput())
	case *agentdv1.Part_Media:
		m := k.Media
		return strings.TrimSpace(fmt.Sprintf("[%s] %s", m.GetMimeType(), cmp.Or(m.GetName(), m.GetUri())))
	case *agentdv1.Part_Reasoning:
		if k.Reasoning.GetText() == "" {
			return ""
		}
		return "(thinking) " + k.Reasoning.GetText()
	}
	return part.GetText()
}

const threadsDeleteUsage = `usage: agentd threads delete ID [flags]

Deletes a thread for good: its items, and its generations with their
stored conversations, checkpoints, event logs and requests (a generation
of it that is running is cancelled first). Prints how many items and
generations went with it. --json prints the DeleteThreadResponse.

example:
  agentd threads delete thr_0193a5b2c4d6e8f0a1b2c3d4e5f60718
` + clientUsage

// threadsDelete runs `agentd threads delete`.
func threadsDelete(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := newFlagSet("agentd threads delete", threadsDeleteUsage)
	c.register(fs)
	id, err := c.parseWithID(fs, "thread", args, getenv, stdout)
	if err != nil {
		return err
	}
	p := c.printing(stdout, stderr)
	return c.call(ctx, func(ctx context.Context, client agentdv1.AgentServiceClient) error {
		res, err := client.DeleteThread(ctx, &agentdv1.DeleteThreadRequest{ThreadId: id})
		switch {
		case err != nil:
			return err
		case p.asJSON:
			p.json(res)
		default:
			p.line("deleted %s (items: %d, generations: %d)", id, res.GetItemsDeleted(), res.GetGenerationsDeleted())
		}
		return nil
	})
}

// metadataFlag collects KEY=VALUE entries of a thread's metadata.
type metadataFlag map[string]string

func (m *metadataFlag) String() string { return "" }

func (m *metadataFlag) Set(v string) error {
	key, value, ok := strings.Cut(v, "=")
	if !ok || key == "" {
		return errors.New("want KEY=VALUE")
	}
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[key] = value
	return nil
}

// entries are m's entries as KEY=VALUE, by key.
func entries(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}
