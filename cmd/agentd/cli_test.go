package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcpdemo"
)

// demoEnv makes the test binary, started by the bridge, serve the demo MCP
// server, registered as "demo" as agentd's default configuration does.
const demoEnv = "AGENTD_TEST_MCP_DEMO"

func TestMain(m *testing.M) {
	if os.Getenv(demoEnv) == "1" {
		if err := mcpdemo.Run(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The requests of examples/, as the docs use them.
const (
	demoStart     = "../../examples/demo-start.json"
	approvalStart = "../../examples/approval-start.json"
)

// serveDemo serves a durable agentd, with the demo MCP server, on a
// loopback port until the test ends, and returns its address.
func serveDemo(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.Bridge.Pool.Warm = 0
	cfg.Bridge.Servers = map[string]config.Server{"demo": {Command: exe, Env: map[string]string{demoEnv: "1"}}}
	return serveAgent(t, cfg)
}

// cli runs agentd's client command args[0] against addr, which it finds in
// AGENTD_ADDR, with stdin; it returns stdout, stderr and the error.
func cli(t *testing.T, addr, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(name string) string {
		if name == "AGENTD_ADDR" {
			return addr
		}
		return ""
	}
	err := clientCommands[args[0]](t.Context(), args[1:], getenv, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

// mustCLI is cli that fails the test on an error.
func mustCLI(t *testing.T, addr, stdin string, args ...string) (string, string) {
	t.Helper()
	out, errOut, err := cli(t, addr, stdin, args...)
	if err != nil {
		t.Fatalf("agentd %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out, errOut
}

func wantLines(t *testing.T, what, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s does not say %q:\n%s", what, w, text)
		}
	}
}

var genID = regexp.MustCompile(`gen_[0-9a-f]{32}`)

// A detached generation is followed from the terminal: generate --detach
// prints its id and the command that follows it; that attach prints its
// events to the end; list shows it, get shows its result; --json prints
// protojson lines throughout, and the notes for people on stderr.
func TestDetachAttachListGet(t *testing.T) {
	t.Parallel()
	addr := serveDemo(t)
	out, _ := mustCLI(t, addr, "", "generate", "--detach", "--request", demoStart)
	id := genID.FindString(out)
	follow := regexp.MustCompile(`follow it: (.*)`).FindStringSubmatch(out)
	if id == "" || follow == nil {
		t.Fatalf("generate --detach printed no id and no command to follow it:\n%s", out)
	}
	words := shellWords(t, follow[1])
	if want := []string{os.Args[0], "attach", id}; !slices.Equal(words, want) {
		t.Errorf("the command to follow it: %q; want %q", words, want)
	}

	out, _ = mustCLI(t, addr, "", words[1:]...)
	wantLines(t, "attach", out, "started "+id, "tool call echo", "The demo server answered: hello from agentd", "completed (end_turn, 1 tool turns)")

	out, _ = mustCLI(t, addr, "", "list")
	if !regexp.MustCompile(`(?m)^ID +STATE +CREATED +UPDATED$`).MatchString(out) || !regexp.MustCompile(`(?m)^`+id+` +completed +`).MatchString(out) {
		t.Errorf("list does not show the generation completed:\n%s", out)
	}
	out, _ = mustCLI(t, addr, "", "get", id)
	wantLines(t, "get", out, id+" completed", "finished:", "message:  The demo server answered: hello from agentd")

	var g agentdv1.Generation
	out, errOut := mustCLI(t, addr, "", "get", "--json", id)
	unmarshalLines(t, out, &g)
	if g.GetGenerationId() != id || g.GetState() != agentdv1.GenerationState_GENERATION_STATE_COMPLETED || errOut != "" {
		t.Errorf("get --json: %v; stderr %q", &g, errOut)
	}
	out, _ = mustCLI(t, addr, "", "list", "--json", "--state", "completed")
	if gens := unmarshalLines(t, out, &agentdv1.Generation{}); len(gens) != 1 || gens[0].(*agentdv1.Generation).GetGenerationId() != id {
		t.Errorf("list --json --state completed: %v", gens)
	}
	out, errOut = mustCLI(t, addr, "", "attach", id, "--json", "--after", "1")
	events := unmarshalLines(t, out, &agentdv1.GenerateResponse{})
	if first := events[0].(*agentdv1.GenerateResponse); first.GetSequence() != 2 || events[len(events)-1].(*agentdv1.GenerateResponse).GetCompleted() == nil || errOut != "" {
		t.Errorf("attach --json --after 1: first %v, last %v; stderr %q", first, events[len(events)-1], errOut)
	}
	out, errOut = mustCLI(t, addr, "", "generate", "--detach", "--json", "--request", demoStart)
	if events := unmarshalLines(t, out, &agentdv1.GenerateResponse{}); len(events) != 1 || events[0].(*agentdv1.GenerateResponse).GetStarted() == nil {
		t.Errorf("generate --detach --json printed %v", events)
	}
	wantLines(t, "generate --detach --json's stderr", errOut, "follow it: ")
}

// A pause prints the command that resumes it; that command, run as
// printed, resumes the generation, which prints "resumed" and completes.
// With --json the command goes to stderr. The deprecated generate
// --resume still resumes.
func TestPauseHintResumes(t *testing.T) {
	t.Parallel()
	addr := serveDemo(t)
	for _, tc := range []struct {
		name string
		json bool
	}{{"text", false}, {"json", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"generate", "--addr", addr, "--request", approvalStart}
			if tc.json {
				args = append(args, "--json")
			}
			out, errOut := mustCLI(t, "", "", args...)
			hints := out
			if tc.json {
				unmarshalLines(t, out, &agentdv1.GenerateResponse{})
				hints = errOut
			}
			wantLines(t, "the pause", hints, "(--decline in place of --approve refuses)")
			id := genID.FindString(out)
			hint := regexp.MustCompile(`resume it: (.*)`).FindStringSubmatch(hints)
			if hint == nil {
				t.Fatalf("the pause printed no command:\n%s", hints)
			}
			words := shellWords(t, hint[1])
			want := []string{os.Args[0], "resume", id, "--approve", "approval_call_1_1", "--request", approvalStart, "--addr", addr}
			if !slices.Equal(words, want) {
				t.Errorf("the command that resumes: %q; want %q", words, want)
			}
			out, _ = mustCLI(t, "", "", words[1:]...)
			if !strings.HasPrefix(out, "resumed "+id+"\n") && !tc.json {
				t.Errorf("the resume does not say resumed first:\n%s", out)
			}
			wantLines(t, "the resume", out, "approved by a person", "completed")
		})
	}
	t.Run("generate --resume", func(t *testing.T) {
		t.Parallel()
		out, _ := mustCLI(t, addr, "", "generate", "--request", approvalStart)
		id := genID.FindString(out)
		out, errOut := mustCLI(t, addr, "", "generate", "--resume", id, "--decline", "approval_call_1_1", "--request", approvalStart)
		wantLines(t, "generate --resume", out, "resumed "+id, `{"error":"declined by user"}`, "completed")
		wantLines(t, "generate --resume's stderr", errOut, "deprecated", " resume "+id)
	})
}

// agentd attach follows a generation to its pause, asks at the terminal
// for what it waits for, and resumes it with the answers; when the input
// ends instead, it prints the command that resumes it.
func TestAttachAnswersPause(t *testing.T) {
	t.Parallel()
	addr := serveDemo(t)
	out, _ := mustCLI(t, addr, "", "generate", "--detach", "--request", approvalStart)
	id := genID.FindString(out)

	out, _ = mustCLI(t, addr, "", "attach", id)
	wantLines(t, "attach without answers", out, "paused "+id, "resume it: ")
	if !strings.Contains(out, " resume "+id+" --approve approval_call_1_1\n") {
		t.Errorf("attach's command to resume is not the bare resume:\n%s", out)
	}

	out, errOut := mustCLI(t, addr, "y\n", "attach", id, "--request", approvalStart)
	wantLines(t, "attach answering", out, "paused "+id, "resumed "+id, "tool done echo (ok", "completed")
	wantLines(t, "attach's question", errOut, `Allow echo to run? {"text":"approved by a person"} [y/N]`)
}

// fakeService is an AgentService whose Generate is a function.
type fakeService struct {
	agentdv1.UnimplementedAgentServiceServer
	generate func(agentdv1.AgentService_GenerateServer) error
}

func (f *fakeService) Generate(s agentdv1.AgentService_GenerateServer) error { return f.generate(s) }

// agentd resume sends no agent unless --request or the agent flags
// declare one; when agentd answers that it needs the agent, the error says
// to give --request. The answers go as given.
func TestResumeWithoutAgent(t *testing.T) {
	t.Parallel()
	got := make(chan *agentdv1.ResumeGeneration, 2)
	addr := serveFake(t, &fakeService{generate: func(s agentdv1.AgentService_GenerateServer) error {
		first, err := s.Recv()
		if err != nil {
			return err
		}
		r := first.GetResume()
		got <- r
		if r.GetAgent() == nil {
			return status.Error(codes.InvalidArgument, "invalid request: resume.agent: is required: the agent's declarations, with their credentials, as when it started")
		}
		return s.Send(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Started{Started: &agentdv1.GenerationStarted{GenerationId: r.GetGenerationId(), Resumed: true}}})
	}})
	_, _, err := cli(t, addr, "", "resume", "gen_1", "--approve", "approval_1,approval_2", "--decline", "approval_3", "--result", "call_1=42")
	if err == nil || !strings.Contains(err.Error(), "give --request with the original request's file") || !strings.Contains(err.Error(), "resume.agent: is required") {
		t.Errorf("resume without an agent that agentd needs: %v", err)
	}
	want := &agentdv1.ResumeGeneration{GenerationId: "gen_1", ApprovalDecisions: []*agentdv1.ApprovalDecision{
		{RequestId: "approval_1", Approved: true}, {RequestId: "approval_2", Approved: true}, {RequestId: "approval_3"},
	}, FunctionResults: []*agentdv1.FunctionResult{{CallId: "call_1", Output: "42"}}}
	if r := <-got; !proto.Equal(r, want) {
		t.Errorf("the resume sent: %v; want %v", r, want)
	}

	out, _ := mustCLI(t, addr, "", "resume", "gen_1", "--approve", "approval_1", "--provider", "script", "--mcp", "demo")
	if r := <-got; r.GetAgent().GetProvider() != "script" || r.GetAgent().GetMcps()[0].GetRef() != "demo" {
		t.Errorf("the resume's agent: %v", r.GetAgent())
	}
	if out != "resumed gen_1\n" {
		t.Errorf("resume printed %q", out)
	}
}

// Every command's -h prints a paragraph, its flags and an example on
// stdout, and exits 0; agentd alone, an unknown command and a bad flag
// exit 2.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"generate", "-h"}, {"attach", "--help"}, {"get", "-h"}, {"list", "-help"}, {"resume", "-h"},
		{"serve", "-h"}, {"bridge", "-h"}, {"keys", "-h"}, {"mcp-demo", "-h"}, {"version", "-h"},
		{"help", "generate"}, {"get", "gen_1", "-h"},
		{"chat", "-h"}, {"help", "chat"}, {"threads", "list", "-h"}, {"threads", "get", "thr_1", "-h"}, {"threads", "delete", "--help"},
	} {
		var out, errOut bytes.Buffer
		err := run(t.Context(), args, strings.NewReader(""), &out, &errOut)
		if code := exitCode(err, &errOut); code != 0 || !errors.Is(err, flag.ErrHelp) {
			t.Errorf("agentd %s: exit %d, %v", strings.Join(args, " "), code, err)
		}
		name := args[0]
		if name == "help" {
			name = args[1]
		}
		wantLines(t, "agentd "+strings.Join(args, " "), out.String(), "usage: agentd "+name, "\nexample")
		if name != "keys" && name != "mcp-demo" && name != "version" {
			wantLines(t, "agentd "+strings.Join(args, " "), out.String(), "\nflags:\n")
		}
		if errOut.Len() > 0 {
			t.Errorf("agentd %s wrote on stderr:\n%s", strings.Join(args, " "), errOut.String())
		}
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"help", "help"}, {"-h", "-h"}, {"--help", "help"}} {
		var out bytes.Buffer
		if err := run(t.Context(), args, strings.NewReader(""), &out, io.Discard); exitCode(err, io.Discard) != 0 || !strings.Contains(out.String(), "resume     resume a paused generation") {
			t.Errorf("agentd %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	var out bytes.Buffer
	_ = run(t.Context(), []string{"serve", "-h"}, nil, &out, io.Discard)
	wantLines(t, "agentd serve -h", out.String(), "-bridge-addr address\n")

	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{nil, ""},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"list", "--nope"}, `flag provided but not defined: -nope ("agentd list -h" shows the flags)`},
		{[]string{"serve", "--nope"}, `flag provided but not defined: -nope ("agentd serve -h" shows the flags)`},
		{[]string{"serve", "now"}, `agentd serve takes flags only, not "now"`},
		{[]string{"get"}, `want one generation id ("agentd get -h" shows how)`},
		{[]string{"get", "gen_1", "gen_2"}, `want one generation id`},
		{[]string{"version", "now"}, `agentd version takes no arguments`},
		{[]string{"chat", "now"}, `agentd chat takes flags only`},
		{[]string{"chat", "--history", "-1"}, `--history from 0 to 1000`},
		{[]string{"threads", "get"}, `want one thread id ("agentd threads get -h" shows how)`},
		{[]string{"threads", "list", "--page-size", "1001"}, `--page-size from 0 to 1000`},
	} {
		var errOut bytes.Buffer
		err := run(t.Context(), tc.args, strings.NewReader(""), io.Discard, &errOut)
		if code := exitCode(err, &errOut); code != 2 || !strings.Contains(errOut.String(), tc.wantErr) {
			t.Errorf("agentd %s: exit %d, stderr:\n%s\nwant 2 and %q", strings.Join(tc.args, " "), code, errOut.String(), tc.wantErr)
		}
	}
}

// Every client command finds agentd at AGENTD_ADDR (--addr overrides
// it), and a refused connection says what to do about it, naming
// AGENTD_ADDR.
func TestRefusedConnection(t *testing.T) {
	t.Parallel()
	addr := serveDemo(t)
	nobody := freePort(t)
	for _, args := range [][]string{
		{"generate", "--prompt", "hi"}, {"attach", "gen_1"}, {"get", "gen_1"}, {"list"}, {"resume", "gen_1", "--approve", "a"},
		{"chat"}, {"threads", "list"}, {"threads", "get", "thr_1"}, {"threads", "delete", "thr_1"},
	} {
		_, _, err := cli(t, nobody, "", args...)
		if err == nil || !strings.Contains(err.Error(), "cannot reach agentd at "+nobody+": connection refused") || !strings.Contains(err.Error(), "AGENTD_ADDR") || !strings.Contains(err.Error(), "make run") {
			t.Errorf("agentd %s with nothing at AGENTD_ADDR: %v", args[0], err)
		}
		_, _, err = cli(t, nobody, "", append(args, "--addr", addr)...)
		if err != nil && strings.Contains(err.Error(), "connection refused") {
			t.Errorf("agentd %s --addr: %v", args[0], err)
		}
	}
	if _, _, err := cli(t, addr, "", "list"); err != nil {
		t.Errorf("list at AGENTD_ADDR: %v", err)
	}
}

// agentd list reads page after page until it has --limit generations, or
// all of them with --limit 0, and --state keeps the states given.
func TestListPages(t *testing.T) {
	t.Parallel()
	addr := serveDemo(t)
	var ids []string
	for range 3 {
		out, _ := mustCLI(t, addr, "", "generate", "--prompt", "hi")
		ids = append(ids, genID.FindString(out))
	}
	out, _ := mustCLI(t, addr, "", "generate", "--request", approvalStart)
	paused := genID.FindString(out)
	c := &clientFlags{addr: addr}
	for _, tc := range []struct {
		states          []agentdv1.GenerationState
		limit, pageSize int
		want            []string
		more            bool
	}{
		{nil, 0, 2, []string{paused, ids[2], ids[1], ids[0]}, false},
		{nil, 3, 2, []string{paused, ids[2], ids[1]}, true},
		{nil, 4, 1000, []string{paused, ids[2], ids[1], ids[0]}, false},
		{[]agentdv1.GenerationState{agentdv1.GenerationState_GENERATION_STATE_COMPLETED}, 0, 1, []string{ids[2], ids[1], ids[0]}, false},
	} {
		var gens []*agentdv1.Generation
		var more bool
		err := c.call(t.Context(), func(ctx context.Context, client agentdv1.AgentServiceClient) (err error) {
			gens, more, err = listGenerations(ctx, client, tc.states, tc.limit, tc.pageSize)
			return err
		})
		var got []string
		for _, g := range gens {
			got = append(got, g.GetGenerationId())
		}
		if err != nil || !slices.Equal(got, tc.want) || more != tc.more {
			t.Errorf("list %v limit %d in pages of %d: %v, more %v, %v; want %v, more %v", tc.states, tc.limit, tc.pageSize, got, more, err, tc.want, tc.more)
		}
	}
	out, errOut := mustCLI(t, addr, "", "list", "--limit", "2")
	if rows := strings.Count(out, "\ngen_"); rows != 2 || !strings.Contains(out, "\n"+paused+"  paused ") {
		t.Errorf("list --limit 2 printed %d rows:\n%s", rows, out)
	}
	wantLines(t, "list --limit 2", out+errOut, "(the first 2; --limit 0 prints them all)")
	out, _ = mustCLI(t, addr, "", "list", "--state", "paused,failed")
	if rows := strings.Count(out, "\ngen_"); rows != 1 {
		t.Errorf("list --state paused,failed printed %d rows:\n%s", rows, out)
	}
	out, _ = mustCLI(t, addr, "", "list", "--state", "cancelled")
	if out != "no generations\n" {
		t.Errorf("list --state cancelled printed %q", out)
	}
	out, _ = mustCLI(t, addr, "", "get", paused)
	wantLines(t, "get of a paused generation", out, paused+" paused", "waiting for: approval_call_1_1 (echo on demo)", "expires:", "resume it: ")
}

// shellWords splits a printed command line as a shell would.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	env, words, err := splitCommand(line)
	if err != nil || len(env) > 0 {
		t.Fatalf("the printed command %q: %v, %v", line, env, err)
	}
	return words
}

// unmarshalLines reads out's lines as messages like m, failing the test
// on a line that is not one.
func unmarshalLines(t *testing.T, out string, m proto.Message) []proto.Message {
	t.Helper()
	var msgs []proto.Message
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		msg := m.ProtoReflect().New().Interface()
		if err := protojson.Unmarshal(sc.Bytes(), msg); err != nil {
			t.Fatalf("not a %T: %q: %v", m, sc.Text(), err)
		}
		msgs = append(msgs, msg)
	}
	if len(msgs) == 0 {
		t.Fatalf("no JSON lines in %q", out)
	}
	proto.Merge(m, msgs[0])
	return msgs
}
