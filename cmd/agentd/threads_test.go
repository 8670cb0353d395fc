package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// fakeThreads is an AgentService whose thread methods are functions (nil:
// answered notFaked) and whose Generate is fakeService's.
type fakeThreads struct {
	fakeService
	createThread    func(*agentdv1.CreateThreadRequest) (*agentdv1.CreateThreadResponse, error)
	getThread       func(*agentdv1.GetThreadRequest) (*agentdv1.GetThreadResponse, error)
	listThreads     func(*agentdv1.ListThreadsRequest) (*agentdv1.ListThreadsResponse, error)
	listThreadItems func(*agentdv1.ListThreadItemsRequest) (*agentdv1.ListThreadItemsResponse, error)
	deleteThread    func(*agentdv1.DeleteThreadRequest) (*agentdv1.DeleteThreadResponse, error)
}

// notFaked is the error of a method a fake leaves nil.
var notFaked = status.Error(codes.Unimplemented, "not in this fake")

func call[Req, Res any](f func(Req) (Res, error), req Req) (Res, error) {
	if f == nil {
		var zero Res
		return zero, notFaked
	}
	return f(req)
}

func (f *fakeThreads) CreateThread(_ context.Context, r *agentdv1.CreateThreadRequest) (*agentdv1.CreateThreadResponse, error) {
	return call(f.createThread, r)
}

func (f *fakeThreads) GetThread(_ context.Context, r *agentdv1.GetThreadRequest) (*agentdv1.GetThreadResponse, error) {
	return call(f.getThread, r)
}

func (f *fakeThreads) ListThreads(_ context.Context, r *agentdv1.ListThreadsRequest) (*agentdv1.ListThreadsResponse, error) {
	return call(f.listThreads, r)
}

func (f *fakeThreads) ListThreadItems(_ context.Context, r *agentdv1.ListThreadItemsRequest) (*agentdv1.ListThreadItemsResponse, error) {
	return call(f.listThreadItems, r)
}

func (f *fakeThreads) DeleteThread(_ context.Context, r *agentdv1.DeleteThreadRequest) (*agentdv1.DeleteThreadResponse, error) {
	return call(f.deleteThread, r)
}

// created is when the threads of these tests were created, as the
// commands print it.
var created = time.Date(2026, 12, 5, 16, 30, 0, 0, time.UTC)

func testThread(id string, items int64, active string, queued []string, metadata map[string]string) *agentdv1.Thread {
	return &agentdv1.Thread{ThreadId: id, CreatedAt: timestamppb.New(created), UpdatedAt: timestamppb.New(created.Add(time.Minute)),
		ItemCount: items, ActiveGenerationId: active, QueuedGenerationIds: queued, Metadata: metadata}
}

// agentd threads list prints a page of threads, one a line, asks with the
// --metadata and --page-size given, and prints the command that lists
// the next page; --json prints Thread lines.
func TestThreadsList(t *testing.T) {
	t.Parallel()
	asked := make(chan *agentdv1.ListThreadsRequest, 3)
	f := &fakeThreads{listThreads: func(r *agentdv1.ListThreadsRequest) (*agentdv1.ListThreadsResponse, error) {
		asked <- r
		if r.GetMetadata()["end_user"] == "nobody" {
			return &agentdv1.ListThreadsResponse{}, nil
		}
		return &agentdv1.ListThreadsResponse{NextPageToken: "p2", Threads: []*agentdv1.Thread{
			testThread("thr_1", 4, "gen_7", []string{"gen_8", "gen_9"}, map[string]string{"title": "trip to Rome", "end_user": "alice"}),
			testThread("thr_2", 0, "", nil, nil),
		}}, nil
	}}
	addr := serveFake(t, f)
	out, _ := mustCLI(t, addr, "", "threads", "list", "--metadata", "end_user=alice", "--metadata", "title=trip to Rome", "--page-size", "2")
	if r := <-asked; !proto.Equal(r, &agentdv1.ListThreadsRequest{Metadata: map[string]string{"end_user": "alice", "title": "trip to Rome"}, PageSize: 2}) {
		t.Errorf("list asked for %v", r)
	}
	when := localTime(created)
	want := "ID     CREATED                  ITEMS  ACTIVE             METADATA\n" +
		"thr_1  " + when + "  4      gen_7 (+2 queued)  end_user=alice, title=trip to Rome\n" +
		"thr_2  " + when + "  0      -                  -\n" +
		"(more: " + os.Args[0] + " threads list --metadata 'end_user=alice' --metadata 'title=trip to Rome' --page-size 2 --page-token p2)\n"
	if out != want {
		t.Errorf("threads list printed:\n%s\nwant:\n%s", out, want)
	}

	words := shellWords(t, strings.TrimSuffix(strings.TrimPrefix(out[strings.Index(out, "(more: "):], "(more: "), ")\n"))
	mustCLI(t, addr, "", words[1:]...)
	if r := <-asked; r.GetPageToken() != "p2" || r.GetPageSize() != 2 || len(r.GetMetadata()) != 2 {
		t.Errorf("the next page's command asked for %v", r)
	}

	out, errOut := mustCLI(t, addr, "", "threads", "list", "--json")
	<-asked
	if threads := unmarshalLines(t, out, &agentdv1.Thread{}); len(threads) != 2 || threads[0].(*agentdv1.Thread).GetActiveGenerationId() != "gen_7" {
		t.Errorf("threads list --json: %v", threads)
	}
	wantLines(t, "threads list --json's stderr", errOut, "(more: ")

	if out, _ := mustCLI(t, addr, "", "threads", "list", "--metadata", "end_user=nobody"); out != "no threads\n" {
		t.Errorf("threads list of none printed %q", out)
	}
}

// agentd threads get prints a thread; with --items its conversation too,
// oldest first, page after page.
func TestThreadsGet(t *testing.T) {
	t.Parallel()
	f := &fakeThreads{
		getThread: func(r *agentdv1.GetThreadRequest) (*agentdv1.GetThreadResponse, error) {
			th := testThread(r.GetThreadId(), 3, "gen_7", []string{"gen_8"}, map[string]string{"end_user": "alice"})
			th.ExpiresAt = timestamppb.New(created.Add(24 * time.Hour))
			return &agentdv1.GetThreadResponse{Thread: th}, nil
		},
		listThreadItems: func(r *agentdv1.ListThreadItemsRequest) (*agentdv1.ListThreadItemsResponse, error) {
			if r.GetNewestFirst() || r.GetPageSize() != threadItemsPageSize {
				t.Errorf("get --items asked for %v", r)
			}
			if r.GetPageToken() == "" {
				return &agentdv1.ListThreadItemsResponse{NextPageToken: "p2", Items: []*agentdv1.ThreadItem{
					{Message: userMessage("What is in the box?")},
					{Message: &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{
						{Kind: &agentdv1.Part_Reasoning{Reasoning: &agentdv1.Reasoning{Signature: "withheld", Redacted: true}}},
						{Kind: &agentdv1.Part_Text{Text: "Let me look."}},
						{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCall{Name: "open", Arguments: "{}"}}},
					}}},
				}}, nil
			}
			return &agentdv1.ListThreadItemsResponse{Items: []*agentdv1.ThreadItem{
				{Message: &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{
					{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResult{Name: "open", Output: "locked", IsError: true}}},
				}}},
			}}, nil
		},
	}
	addr := serveFake(t, f)
	head := "thr_1\n" +
		"  created:  " + localTime(created) + "\n" +
		"  updated:  " + localTime(created.Add(time.Minute)) + "\n" +
		"  expires:  " + localTime(created.Add(24*time.Hour)) + "\n" +
		"  items:    3\n  active:   gen_7\n  queued:   gen_8\n  metadata: end_user=alice\n"
	if out, _ := mustCLI(t, addr, "", "threads", "get", "thr_1"); out != head {
		t.Errorf("threads get printed:\n%s\nwant:\n%s", out, head)
	}
	want := head + "user: What is in the box?\nassistant: Let me look.\nassistant: tool call open {}\ntool: tool result open (error): locked\n"
	if out, _ := mustCLI(t, addr, "", "threads", "get", "--items", "thr_1"); out != want {
		t.Errorf("threads get --items printed:\n%s\nwant:\n%s", out, want)
	}
	out, _ := mustCLI(t, addr, "", "threads", "get", "thr_1", "--items", "--json")
	msgs := unmarshalLines(t, strings.SplitN(out, "\n", 2)[0], &agentdv1.Thread{})
	items := unmarshalLines(t, strings.SplitN(out, "\n", 2)[1], &agentdv1.ThreadItem{})
	if msgs[0].(*agentdv1.Thread).GetThreadId() != "thr_1" || len(items) != 3 {
		t.Errorf("threads get --items --json printed:\n%s", out)
	}
}

// agentd threads delete says what it deleted; an error is agentd's.
func TestThreadsDelete(t *testing.T) {
	t.Parallel()
	f := &fakeThreads{deleteThread: func(r *agentdv1.DeleteThreadRequest) (*agentdv1.DeleteThreadResponse, error) {
		if r.GetThreadId() != "thr_1" {
			return nil, notFaked
		}
		return &agentdv1.DeleteThreadResponse{ItemsDeleted: 12, GenerationsDeleted: 3}, nil
	}}
	addr := serveFake(t, f)
	if out, _ := mustCLI(t, addr, "", "threads", "delete", "thr_1"); out != "deleted thr_1 (items: 12, generations: 3)\n" {
		t.Errorf("threads delete printed %q", out)
	}
	out, _ := mustCLI(t, addr, "", "threads", "delete", "thr_1", "--json")
	var res agentdv1.DeleteThreadResponse
	if unmarshalLines(t, out, &res); res.GetItemsDeleted() != 12 {
		t.Errorf("threads delete --json printed %q", out)
	}
	if _, _, err := cli(t, addr, "", "threads", "delete", "thr_2"); err == nil || !strings.Contains(err.Error(), "Unimplemented") {
		t.Errorf("threads delete of another: %v", err)
	}
}

// agentd threads alone, or with no subcommand it knows, says what it
// takes; -h prints its usage.
func TestThreadsUsage(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"threads", "-h"}, nil, &out, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("threads -h: %v", err)
	}
	wantLines(t, "threads -h", out.String(), "usage: agentd threads list|get|delete", "agentd threads delete ID", "\nexamples:\n")
	for _, args := range [][]string{{"threads"}, {"threads", "show", "thr_1"}} {
		if err := run(t.Context(), args, nil, &out, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "want list, get ID or delete ID") {
			t.Errorf("agentd %s: %v", strings.Join(args, " "), err)
		}
	}
}
