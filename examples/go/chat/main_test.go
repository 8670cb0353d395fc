package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/examples/go/internal/connect"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// threads is an AgentService with one thread, "thr_1", kept in memory:
// a generation on it appends its user message and the mock's answer, and
// ListThreadItems serves the items two to a page.
type threads struct {
	agentdv1.UnimplementedAgentServiceServer
	mu      sync.Mutex
	created map[string]string // the metadata CreateThread got
	items   []*agentdv1.Message
}

func (s *threads) CreateThread(_ context.Context, req *agentdv1.CreateThreadRequest) (*agentdv1.CreateThreadResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.created != nil {
		return nil, status.Error(codes.FailedPrecondition, "a second thread")
	}
	s.created = req.GetMetadata()
	return &agentdv1.CreateThreadResponse{Thread: &agentdv1.Thread{ThreadId: "thr_1"}}, nil
}

func (s *threads) GetThread(_ context.Context, req *agentdv1.GetThreadRequest) (*agentdv1.GetThreadResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.GetThreadId() != "thr_1" || s.created == nil {
		return nil, status.Error(codes.NotFound, "no such thread")
	}
	return &agentdv1.GetThreadResponse{Thread: &agentdv1.Thread{ThreadId: "thr_1", ItemCount: int64(len(s.items))}}, nil
}

func (s *threads) Generate(stream agentdv1.AgentService_GenerateServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	start := req.GetStart()
	if start.GetThreadId() != "thr_1" || len(start.GetMessages()) != 1 {
		return status.Errorf(codes.InvalidArgument, "want thread thr_1 and one message, got %v", start)
	}
	answer := "Mock response to: " + connect.Text(start.GetMessages()[0])
	s.mu.Lock()
	s.items = append(s.items, start.GetMessages()[0], &agentdv1.Message{
		Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: answer}}},
	})
	s.mu.Unlock()
	for _, ev := range []*agentdv1.GenerateResponse{
		{Sequence: 1, Event: &agentdv1.GenerateResponse_Started{Started: &agentdv1.GenerationStarted{GenerationId: "gen_1", ThreadId: "thr_1"}}},
		{Sequence: 2, Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: answer}}},
		{Sequence: 3, Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{}}},
	} {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	return nil
}

func (s *threads) ListThreadItems(_ context.Context, req *agentdv1.ListThreadItemsRequest) (*agentdv1.ListThreadItemsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, _ := strconv.Atoi(req.GetPageToken())
	resp := &agentdv1.ListThreadItemsResponse{}
	for i := from; i < len(s.items) && i < from+2; i++ {
		resp.Items = append(resp.Items, &agentdv1.ThreadItem{Position: int64(i), Message: s.items[i]})
	}
	if from+2 < len(s.items) {
		resp.NextPageToken = strconv.Itoa(from + 2)
	}
	return resp, nil
}

// The first run creates the thread for its end user and keeps its id;
// the second continues it, sending only its own line, and lists the
// first run's lines among the thread's items.
func TestChatContinuesItsThread(t *testing.T) {
	s := &threads{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	agentdv1.RegisterAgentServiceServer(srv, s)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() { srv.Stop(); <-served }()

	o := connect.Options{Address: lis.Addr().String()}
	state := filepath.Join(t.TempDir(), "chat-thread.txt")
	var first bytes.Buffer
	if err := run(o, state, strings.NewReader("my name is Ada\n"), &first); err != nil {
		t.Fatalf("first run: %v\n%s", err, first.String())
	}
	if got, err := os.ReadFile(state); err != nil || string(got) != "thr_1\n" {
		t.Fatalf("the state file holds %q (%v), want the thread's id", got, err)
	}
	if s.created["end_user"] != endUser {
		t.Errorf("CreateThread got metadata %v, want end_user %q", s.created, endUser)
	}
	var second bytes.Buffer
	if err := run(o, state, strings.NewReader("what is my name?\n"), &second); err != nil {
		t.Fatalf("second run: %v\n%s", err, second.String())
	}
	for _, want := range []string{
		"continuing thr_1 (2 items)",
		"agent: Mock response to: what is my name?",
		"  0 user: my name is Ada",
		"  1 assistant: Mock response to: my name is Ada",
		"  3 assistant: Mock response to: what is my name?",
	} {
		if !strings.Contains(second.String(), want) {
			t.Errorf("the second run did not print %q:\n%s", want, second.String())
		}
	}
}
