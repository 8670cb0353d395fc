package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// chatModel is a Generate for chats: each start's user line decides what
// its generation does. "queue" is queued behind another generation;
// "busy" is refused THREAD_BUSY; "fail" fails once
// started; "tool" asks to approve a call of echo and pauses when the
// client half-closes instead; anything else is echoed. It keeps every
// start.
type chatModel struct {
	mu     sync.Mutex
	starts []*agentdv1.StartGeneration
}

func (m *chatModel) generate(s agentdv1.AgentService_GenerateServer) error {
	first, err := s.Recv()
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.starts = append(m.starts, first.GetStart())
	id := fmt.Sprintf("gen_%d", len(m.starts))
	m.mu.Unlock()
	text := messageText(first.GetStart().GetMessages()[0])
	if text == "queue" {
		return s.Send(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Queued{Queued: &agentdv1.GenerationQueued{GenerationId: id, ThreadId: first.GetStart().GetThreadId(), BehindGenerationId: "gen_held"}}})
	}
	if text == "busy" {
		st, _ := status.New(codes.FailedPrecondition, "the thread is held").WithDetails(&errdetails.ErrorInfo{
			Reason: threadBusy, Domain: "agentd", Metadata: map[string]string{"thread_id": first.GetStart().GetThreadId(), "generation_id": "gen_held"}})
		return st.Err()
	}
	if err := s.Send(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Started{Started: &agentdv1.GenerationStarted{GenerationId: id, ThreadId: first.GetStart().GetThreadId()}}}); err != nil {
		return err
	}
	switch text {
	case "fail":
		return status.Error(codes.Internal, "the model broke")
	case "tool":
		return approveEcho(s, id)
	}
	return answer(s, "echo: "+text)
}

// approveEcho asks for the approval of a call of echo, and runs it when
// approved; when the client half-closes instead, the generation pauses.
func approveEcho(s agentdv1.AgentService_GenerateServer, id string) error {
	req := &agentdv1.ApprovalRequest{Id: "approval_1", ToolName: "echo", ServerName: "demo", Prompt: "Allow echo to run?", Arguments: `{"text":"hi"}`}
	if err := s.Send(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ApprovalRequest{ApprovalRequest: req}}); err != nil {
		return err
	}
	decision, err := s.Recv()
	if errors.Is(err, io.EOF) {
		return s.Send(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Paused{Paused: &agentdv1.GenerationPaused{GenerationId: id, ApprovalRequests: []*agentdv1.ApprovalRequest{req}}}})
	}
	if err != nil {
		return err
	}
	if !decision.GetApprovalDecision().GetApproved() {
		return answer(s, "declined")
	}
	if err := s.Send(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ToolCallFinished{ToolCallFinished: &agentdv1.ToolCallFinished{ToolName: "echo", Output: "hi"}}}); err != nil {
		return err
	}
	return answer(s, "echo said hi")
}

// answer streams text in two pieces, a turn's usage and the end.
func answer(s agentdv1.AgentService_GenerateServer, text string) error {
	half := len(text) / 2
	for _, ev := range []*agentdv1.GenerateResponse{
		&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: text[:half]}}},
		&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: text[half:]}}},
		&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Usage{Usage: &agentdv1.Usage{Turn: 1, InputTokens: 3, OutputTokens: 2}}},
		&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{StopReason: agentdv1.StopReason_STOP_REASON_END_TURN}}},
	} {
		if err := s.Send(ev); err != nil {
			return err
		}
	}
	return nil
}

func (m *chatModel) sent() []*agentdv1.StartGeneration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.starts)
}

// chatServer serves a fakeThreads with m's Generate and whose CreateThread
// creates thr_1, sending what it was asked to created.
func chatServer(t *testing.T, m *chatModel, created chan<- *agentdv1.CreateThreadRequest) (*fakeThreads, string) {
	t.Helper()
	f := &fakeThreads{fakeService: fakeService{generate: m.generate}}
	f.createThread = func(r *agentdv1.CreateThreadRequest) (*agentdv1.CreateThreadResponse, error) {
		created <- r
		return &agentdv1.CreateThreadResponse{Thread: &agentdv1.Thread{ThreadId: "thr_1", Metadata: r.GetMetadata()}}, nil
	}
	return f, serveFake(t, f)
}

// A chat without --thread creates a thread, with end_user and the
// --metadata, and prints the command that comes back to it; each line is
// one generation on the thread with that line alone, printed as its text
// streams without the start, usage and end of each; /thread prints the
// thread's id.
func TestChatNewThread(t *testing.T) {
	t.Parallel()
	var m chatModel
	created := make(chan *agentdv1.CreateThreadRequest, 1)
	_, addr := chatServer(t, &m, created)
	out, errOut := mustCLI(t, addr, "hello\n/thread\n\nagain\n", "chat", "--end-user", "alice", "--metadata", "title=trip", "--provider", "mock", "--model", "m1")

	if r := <-created; !cmp.Equal(r.GetMetadata(), map[string]string{"end_user": "alice", "title": "trip"}) {
		t.Errorf("the thread's metadata: %v", r.GetMetadata())
	}
	back := regexp.MustCompile(`(?m)^thread thr_1; come back to it: (.*)$`).FindStringSubmatch(out)
	if back == nil {
		t.Fatalf("chat printed no command to come back:\n%s", out)
	}
	if words, want := shellWords(t, back[1]), []string{os.Args[0], "chat", "--thread", "thr_1", "--provider", "mock", "--model", "m1", "--end-user", "alice"}; !slices.Equal(words, want) {
		t.Errorf("the command to come back: %q; want %q", words, want)
	}
	if want := back[0] + "\necho: hello\nthr_1\necho: again\n"; out != want {
		t.Errorf("chat printed:\n%s\nwant:\n%s", out, want)
	}
	if want := "> > > > > \n"; errOut != want {
		t.Errorf("chat's prompts: %q; want %q", errOut, want)
	}
	var want []*agentdv1.StartGeneration
	for _, line := range []string{"hello", "again"} {
		want = append(want, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "mock", Model: "m1"}, EndUser: "alice", ThreadId: "thr_1", Messages: []*agentdv1.Message{userMessage(line)}})
	}
	if diff := cmp.Diff(want, m.sent(), protocmp.Transform()); diff != "" {
		t.Errorf("the starts (-want +got):\n%s", diff)
	}
}

// A generation of a chat asks its approvals inline, as agentd generate
// does, and the answer goes on its stream; when the input ends instead,
// it pauses and the chat prints the command that resumes it, then ends.
func TestChatApproval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, stdin string
		want        []string
	}{
		{"approved", "tool\ny\n/quit\nnever sent\n", []string{"approval requested: echo on demo\n", "tool done echo (ok, 0s): hi\necho said hi\n"}},
		{"paused", "tool\n", []string{"approval requested: echo on demo\n", "paused gen_1 until ", " resume gen_1 --approve approval_1 --provider mock --mcp demo\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var m chatModel
			_, addr := chatServer(t, &m, make(chan *agentdv1.CreateThreadRequest, 1))
			out, errOut := mustCLI(t, addr, tc.stdin, "chat", "--provider", "mock", "--mcp", "demo")
			wantLines(t, "chat", out, tc.want...)
			wantLines(t, "chat's questions", errOut, "> "+`Allow echo to run? {"text":"hi"} [y/N] `)
			if n := len(m.sent()); n != 1 {
				t.Errorf("%d generations started; want 1", n)
			}
		})
	}
}

// With --thread a chat creates nothing: it prints the thread's last
// --history items, oldest first, and where the earlier ones are, then
// runs its lines on that thread.
func TestChatContinuesThread(t *testing.T) {
	t.Parallel()
	var m chatModel
	asked := make(chan *agentdv1.ListThreadItemsRequest, 1)
	f := &fakeThreads{fakeService: fakeService{generate: m.generate}}
	f.listThreadItems = func(r *agentdv1.ListThreadItemsRequest) (*agentdv1.ListThreadItemsResponse, error) {
		asked <- r
		return &agentdv1.ListThreadItemsResponse{NextPageToken: "more", Items: []*agentdv1.ThreadItem{
			{Position: 4, Message: &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "It is 21 degrees."}}}}},
			{Position: 3, Message: &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResult{Name: "weather", Output: "21"}}}}}},
			{Position: 2, Message: &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCall{Name: "weather", Arguments: `{"city":"Rome"}`}}}}}},
		}}, nil
	}
	addr := serveFake(t, f)
	out, _ := mustCLI(t, addr, "thanks\n", "chat", "--thread", "thr_9", "--history", "3")

	if r := <-asked; !proto.Equal(r, &agentdv1.ListThreadItemsRequest{ThreadId: "thr_9", PageSize: 3, NewestFirst: true}) {
		t.Errorf("the items asked for: %v", r)
	}
	want := `(earlier items: ` + os.Args[0] + ` threads get thr_9 --items)
assistant: tool call weather {"city":"Rome"}
tool: tool result weather (ok): 21
assistant: It is 21 degrees.
echo: thanks
`
	if out != want {
		t.Errorf("chat --thread printed:\n%s\nwant:\n%s", out, want)
	}
	if s := m.sent(); len(s) != 1 || s[0].GetThreadId() != "thr_9" {
		t.Errorf("the starts: %v", s)
	}
}

// A line that another generation's hold on the thread refuses, a line
// queued behind it, and a generation that fails, are told, and the chat
// goes on.
func TestChatBusyQueuedFailed(t *testing.T) {
	t.Parallel()
	var m chatModel
	_, addr := chatServer(t, &m, make(chan *agentdv1.CreateThreadRequest, 1))
	out, _ := mustCLI(t, addr, "busy\nqueue\nfail\nhello\n", "chat", "--multitask", "reject", "--on-failure", "keep-input")
	wantLines(t, "chat", out,
		"not sent: gen_held holds the thread ("+os.Args[0]+" get gen_held shows it); --multitask enqueue queues a line behind it, interrupt stops it at its next safe point\n",
		"queued gen_2 on thread thr_1 behind gen_held\nit runs once the thread is free; follow it: "+os.Args[0]+" attach gen_2\n",
		"gen_3 failed: Internal: the model broke\n",
		"echo: hello\n",
		" --multitask reject --on-failure keep-input\n")
	for _, s := range m.sent() {
		if s.GetMultitask() != agentdv1.Multitask_MULTITASK_REJECT || s.GetOnFailure() != agentdv1.OnFailure_ON_FAILURE_KEEP_INPUT {
			t.Errorf("a start's multitask %v, on_failure %v", s.GetMultitask(), s.GetOnFailure())
		}
	}
}

// A chat's --request gives the agent and how it runs, not the messages;
// a bad --multitask names the values it takes.
func TestChatFlags(t *testing.T) {
	t.Parallel()
	var m chatModel
	_, addr := chatServer(t, &m, make(chan *agentdv1.CreateThreadRequest, 1))
	mustCLI(t, addr, "hi\n", "chat", "--request", approvalStart)
	s := m.sent()
	if len(s) != 1 || s[0].GetAgent().GetMcps()[0].GetRef() != "demo" || len(s[0].GetMessages()) != 1 || messageText(s[0].GetMessages()[0]) != "hi" {
		t.Errorf("the start of a chat with --request: %v", s)
	}
	_, _, err := cli(t, addr, "", "chat", "--multitask", "later")
	if err == nil || !strings.Contains(err.Error(), "want one of reject, enqueue, interrupt") {
		t.Errorf("chat --multitask later: %v", err)
	}
}
