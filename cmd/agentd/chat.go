package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

const chatUsage = `usage: agentd chat [flags]

Talks with an agent at the terminal, on a thread: a conversation agentd
remembers. Each line you type is one generation on the thread, which
sees the whole conversation so far; its text prints as it streams, its
tool calls as agentd generate prints them, and what it asks (approvals
y/n, function results, authorizations, input) is asked inline as agentd
generate asks it. Without --thread, agentd chat creates a thread
(metadata end_user from --end-user, and any --metadata) and prints its
id and the command that comes back to it; with --thread it continues
that thread, printing its last --history items first. /thread prints
the thread's id; /quit or the end of the input (Ctrl-D) ends the chat. A
generation that pauses (the input ended while it asked) prints the
command that resumes it. The agent comes from the flags, as for agentd
generate, or from --request's StartGeneration, whose messages are left
out: what you type is the conversation.

examples:
  agentd chat --provider openai --model gpt-4o-mini --mcp demo --end-user alice
  agentd chat --thread thr_0193a5b2c4d6e8f0a1b2c3d4e5f60718 --provider openai --model gpt-4o-mini
` + clientUsage

// chatFlags are agentd chat's flags.
type chatFlags struct {
	fs        *flag.FlagSet
	client    clientFlags
	agent     agentFlags
	thread    string
	endUser   string
	metadata  metadataFlag
	history   int
	multitask agentdv1.Multitask
	onFailure agentdv1.OnFailure
}

// chatRepeated are the flags, besides the agent's, that the command to
// come back to a thread repeats.
var chatRepeated = []string{"end-user", "multitask", "on-failure"}

// chat runs `agentd chat`.
func chat(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	f, err := parseChatFlags(args, getenv, stdout)
	if err != nil {
		return err
	}
	start, err := f.template()
	if err != nil {
		return err
	}
	p := f.client.printing(stdout, stderr)
	p.quiet = true
	return f.client.call(ctx, func(ctx context.Context, client agentdv1.AgentServiceClient) error {
		c := &conversation{client: client, p: p, in: newLines(stdin, ctx.Done()), prompt: stderr,
			start: start, thread: cmp.Or(f.thread, start.GetThreadId()), agentArgs: f.agent.args()}
		if err := c.open(ctx, f); err != nil {
			return err
		}
		return c.run(ctx)
	})
}

// parseChatFlags parses args; the client flags not given take their
// variables.
func parseChatFlags(args []string, getenv func(string) string, stdout io.Writer) (*chatFlags, error) {
	f := &chatFlags{fs: newFlagSet("agentd chat", chatUsage)}
	f.client.register(f.fs)
	f.agent.register(f.fs)
	f.fs.StringVar(&f.thread, "thread", "", "continue the thread `ID` (default: a new thread)")
	f.fs.StringVar(&f.endUser, "end-user", "", "the person you chat as, an opaque `id`: a new thread's metadata end_user, and each generation's end_user (whose MCP OAuth tokens it uses)")
	f.fs.Var(&f.metadata, "metadata", "a new thread's metadata entry `KEY=VALUE` (repeatable)")
	f.fs.IntVar(&f.history, "history", 10, "with --thread, print the thread's last `N` items first (0 to 1000)")
	f.fs.Var(&enumFlag[agentdv1.Multitask]{&f.multitask, "MULTITASK_", agentdv1.Multitask_value}, "multitask",
		"what a line does while another generation holds the thread: `reject|enqueue|interrupt` (default reject)")
	f.fs.Var(&enumFlag[agentdv1.OnFailure]{&f.onFailure, "ON_FAILURE_", agentdv1.OnFailure_value}, "on-failure",
		"what the thread keeps of a generation that fails or is cancelled: `discard|keep-input` (your line) (default discard)")
	positional, err := parseFlags(f.fs, args, stdout)
	if err != nil {
		return nil, err
	}
	if len(positional) > 0 || f.history < 0 || f.history > 1000 {
		return nil, errors.New(`agentd chat takes flags only, and --history from 0 to 1000 ("agentd chat -h" shows them)`)
	}
	f.client.fromEnv(f.fs, getenv)
	return f, nil
}

// template is what each line's start has besides the thread and the
// line: the agent, and how the generation runs on the thread.
func (f *chatFlags) template() (*agentdv1.StartGeneration, error) {
	start := &agentdv1.StartGeneration{}
	if f.agent.request != "" {
		var err error
		if start, err = f.agent.fromFile(); err != nil {
			return nil, err
		}
	} else {
		start.Agent = f.agent.fromFlags()
	}
	start.Messages, start.Detach, start.PreviousGenerationId = nil, false, ""
	start.EndUser = cmp.Or(f.endUser, start.GetEndUser())
	start.Multitask = cmp.Or(f.multitask, start.GetMultitask())
	start.OnFailure = cmp.Or(f.onFailure, start.GetOnFailure())
	return start, nil
}

// args are the flags, as given, that the command to come back to the
// thread repeats: the agent's, and how it runs on the thread.
func (f *chatFlags) args() []string {
	args := f.agent.args()
	for _, name := range chatRepeated {
		if flagSet(f.fs, name) {
			args = append(args, "--"+name, f.fs.Lookup(name).Value.String())
		}
	}
	return args
}

// conversation is one agentd chat: its thread, the template of its
// starts, and the person's lines, which answer its questions too.
type conversation struct {
	client    agentdv1.AgentServiceClient
	p         *printer
	in        *lines
	prompt    io.Writer
	start     *agentdv1.StartGeneration
	thread    string
	agentArgs []string
}

// open creates the thread when the chat names none, and tells the person
// how to come back to it; otherwise it shows the thread's last items.
func (c *conversation) open(ctx context.Context, f *chatFlags) error {
	if c.thread != "" {
		return c.recall(ctx, f.history)
	}
	metadata := maps.Clone(f.metadata)
	if f.endUser != "" {
		if metadata == nil {
			metadata = metadataFlag{}
		}
		metadata["end_user"] = f.endUser
	}
	res, err := c.client.CreateThread(ctx, &agentdv1.CreateThreadRequest{Metadata: metadata})
	if err != nil {
		return err
	}
	c.thread = res.GetThread().GetThreadId()
	c.p.note("thread %s; come back to it: %s", c.thread, c.p.next.command("chat", append([]string{"--thread", c.thread}, f.args()...)...))
	return nil
}

// recall prints the last n items of the thread, oldest first.
func (c *conversation) recall(ctx context.Context, n int) error {
	if n == 0 {
		return nil
	}
	res, err := c.client.ListThreadItems(ctx, &agentdv1.ListThreadItemsRequest{ThreadId: c.thread, PageSize: int32(n), NewestFirst: true})
	if err != nil {
		return err
	}
	items := res.GetItems()
	slices.Reverse(items)
	if res.GetNextPageToken() != "" {
		c.p.note("(earlier items: %s)", c.p.next.command("threads", "get", c.thread, "--items"))
	}
	c.p.items(items)
	return nil
}

// run reads the person's lines until the input ends or /quit, each a
// generation on the thread.
func (c *conversation) run(ctx context.Context) error {
	for {
		text, ok := ask(ctx, c.in, c.prompt, "> ")
		switch {
		case !ok || text == "/quit":
			return nil
		case text == "/thread":
			c.p.note("%s", c.thread)
		case text != "":
			if err := c.turn(ctx, text); err != nil {
				return err
			}
		}
	}
}

// turn runs one generation on the thread with text, the user's message,
// answering its questions from the person's lines. A start refused
// because another generation holds the thread, and a generation that
// failed once started, are told and the chat goes on; other errors end
// it.
func (c *conversation) turn(ctx context.Context, text string) error {
	start := proto.CloneOf(c.start)
	start.ThreadId, start.Messages = c.thread, []*agentdv1.Message{userMessage(text)}
	e, err := talk(ctx, c.client, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}, c.p, c.in, c.prompt)
	c.p.endText()
	switch holder := threadHolder(err); {
	case holder != "":
		c.p.note("not sent: %s holds the thread (%s shows it); --multitask enqueue queues a line behind it, interrupt stops it at its next safe point",
			holder, c.p.next.command("get", holder))
	case err != nil && e.id != "":
		s := status.Convert(err)
		c.p.note("%s failed: %s: %s", e.id, s.Code(), s.Message())
	case err != nil:
		return err
	default:
		c.p.ending(e, c.agentArgs)
	}
	return nil
}

// threadBusy is the ErrorInfo reason of a start that agentd refused
// because another generation holds the thread; the ErrorInfo's
// generation_id names that one.
const threadBusy = "THREAD_BUSY"

// threadHolder is the generation that holds the thread when err refused
// a start because of it; "" otherwise.
func threadHolder(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == threadBusy {
			return info.GetMetadata()["generation_id"]
		}
	}
	return ""
}

// enumFlag is a flag that takes one of a proto enum's values, by its name
// in lower case without prefix, with - for _ (keep-input for
// ON_FAILURE_KEEP_INPUT); the unspecified value is not one.
type enumFlag[E interface {
	~int32
	String() string
}] struct {
	v      *E
	prefix string
	values map[string]int32
}

func (f *enumFlag[E]) String() string {
	if f == nil || f.v == nil || *f.v == 0 {
		return ""
	}
	return strings.ReplaceAll(enumWord((*f.v).String(), f.prefix), "_", "-")
}

func (f *enumFlag[E]) Set(v string) error {
	n, ok := f.values[f.prefix+strings.ToUpper(strings.ReplaceAll(v, "-", "_"))]
	if !ok || n == 0 {
		return fmt.Errorf("want one of %s", strings.Join(f.words(), ", "))
	}
	*f.v = E(n)
	return nil
}

// words are the values the flag takes, in the enum's order.
func (f *enumFlag[E]) words() []string {
	var words []string
	for _, n := range slices.Sorted(maps.Values(f.values)) {
		if n != 0 {
			words = append(words, (&enumFlag[E]{v: new(E(n)), prefix: f.prefix}).String())
		}
	}
	return words
}
