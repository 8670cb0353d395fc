package faultsuite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
)

// X-M6: an MCP tool's progress reaches the client as tool_progress events
// between the call's tool_call_started and its tool_call_finished, ending
// with the call's final state; they are not stored, so they carry no
// sequence number.
func TestToolProgressEvents(t *testing.T) {
	s := newStack(t)
	o := s.run(t, t.Context(), scripted(t, []map[string]any{call("progress", map[string]any{"count": 40}), say}, ref("tools", 0)))
	wantCompleted(t, o, "done")
	if seq := o.events[0].GetSequence(); seq != 1 {
		t.Fatalf("the started event is numbered %d; the suite's generations are durable, and it is 1", seq)
	}
	started, finished := -1, -1
	var progress []*agentdv1.ToolProgress
	for i, ev := range o.events {
		switch {
		case ev.GetToolCallStarted() != nil:
			started = i
		case ev.GetToolCallFinished() != nil:
			finished = i
		case ev.GetToolProgress() != nil:
			if started < 0 || finished >= 0 {
				t.Errorf("tool_progress at event %d, outside its call (started at %d, finished at %d)", i, started, finished)
			}
			if ev.GetSequence() != 0 {
				t.Errorf("tool_progress numbered %d; it is not stored", ev.GetSequence())
			}
			progress = append(progress, ev.GetToolProgress())
		}
	}
	if len(progress) == 0 {
		t.Fatalf("no tool_progress event in %v", o.events)
	}
	callID := o.events[started].GetToolCallStarted().GetCallId()
	want := &agentdv1.ToolProgress{CallId: callID, Progress: 40, Total: 40, Message: "step 40"}
	if diff := cmp.Diff(want, progress[len(progress)-1], protocmp.Transform()); diff != "" {
		t.Errorf("the last tool_progress (-want +got):\n%s", diff)
	}
}

// X-M6: a server's log message is in agentd's log with the generation it
// was written for.
func TestServerLogInAgentdLog(t *testing.T) {
	s := newStack(t)
	o := s.run(t, t.Context(), scripted(t, []map[string]any{call("log", map[string]any{"text": "reindexing", "level": "warning"}), say}, ref("tools", 0)))
	wantCompleted(t, o, "ok")
	id := o.events[0].GetStarted().GetGenerationId()
	var line string
	for l := range strings.SplitSeq(s.logs.String(), "\n") {
		if strings.Contains(l, `"mcp server log"`) && strings.Contains(l, "reindexing") {
			line = l
		}
	}
	for _, want := range []string{`"level":"WARN"`, `"logger":"mcptest"`, `"generation":"` + id + `"`, `"server":"tools"`} {
		if !strings.Contains(line, want) {
			t.Errorf("the server's log line %q does not hold %s", line, want)
		}
	}
}

// X-M6: the in-flight tools/call of a generation that is cancelled, by a
// cancel message or by its client going away, is cancelled at the MCP
// server: it receives notifications/cancelled.
func TestCancelledGenerationCancelsTheCall(t *testing.T) {
	for _, how := range []string{"cancel message", "client gone"} {
		t.Run(how, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "cancelled")
			s := newStack(t, func(c *config.Config) {
				srv := c.Bridge.Servers["tools"]
				srv.Env[mcptest.CancelFileEnv] = file
				c.Bridge.Servers["tools"] = srv
			})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			stream, err := s.client.Generate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			start := scripted(t, []map[string]any{call("block", nil), say}, ref("tools", time.Minute))
			if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil {
				t.Fatal(err)
			}
			// The call runs at the server once its stderr line is logged.
			deadline := time.Now().Add(settle)
			for count(s.logs, mcptest.BlockRunning) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the block tool never ran")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if how == "cancel message" {
				if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Cancel{Cancel: &agentdv1.CancelGeneration{Reason: "test"}}}); err != nil {
					t.Fatal(err)
				}
				for {
					if _, err := stream.Recv(); err != nil {
						break
					}
				}
			} else {
				cancel()
			}
			if lines := mcptest.WaitCancelled(t, file); len(lines) != 1 {
				t.Errorf("the server received %q; want one notifications/cancelled", lines)
			}
		})
	}
}
