package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// The examples' structured request and its schema, as the docs use them.
const (
	structuredStart = "../../examples/structured-start.json"
	ticketSchema    = "../../examples/ticket.schema.json"
)

// The ticket examples/structured-start.json's script answers, as the
// CLI prints it: indented, keys in order.
const ticketJSON = `{
  "priority": "high",
  "tags": [
    "checkout",
    "timeout"
  ],
  "title": "Checkout times out"
}
`

// --output-schema sets the agent's output, with the flags' agent or
// --request's, named after its file up to the first dot where that is a
// name, "answer" otherwise; the command that resumes repeats it; a file
// that is not a JSON object is refused, and so is the flag without an
// agent to set it on.
func TestOutputSchemaFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	schema := `{"type": "object", "properties": {"n": {"type": "integer"}}}`
	wantSchema := mustStruct(t, map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}})
	for _, tc := range []struct {
		name, file, wantName string
		args                 []string
		wantErr              string
	}{
		{"named", write("count.json", schema), "count", []string{"--prompt", "hi"}, ""},
		{"up to the first dot", write("count.schema.json", schema), "count", []string{"--prompt", "hi"}, ""},
		{"not a name", write("my count.json", schema), "answer", []string{"--prompt", "hi"}, ""},
		{"no name", write(".json", schema), "answer", []string{"--prompt", "hi"}, ""},
		{"with --request", write("n.json", schema), "n", []string{"--request", demoStart}, ""},
		{"an array", write("list.json", `[{"type": "object"}]`), "", []string{"--prompt", "hi"}, "want a JSON Schema, a JSON object"},
		{"not JSON", write("broken.json", `{"type":`), "", []string{"--prompt", "hi"}, "want a JSON Schema, a JSON object"},
		{"no file", filepath.Join(dir, "nope.json"), "", []string{"--prompt", "hi"}, "--output-schema: open"},
	} {
		f, err := parseGenerateFlags(append(tc.args, "--output-schema", tc.file), func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		start, err := f.agent.start(f.prompt)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		want := &agentdv1.Output{Name: tc.wantName, Schema: wantSchema}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d := cmp.Diff(want, start.GetAgent().GetOutput(), protocmp.Transform()); d != "" {
			t.Errorf("%s: the output (-want +got):\n%s", tc.name, d)
		}
		if args := f.agent.args(); !slices.Equal(args[len(args)-2:], []string{"--output-schema", tc.file}) {
			t.Errorf("%s: the agent's flags %q do not repeat --output-schema", tc.name, args)
		}
	}
	_, _, err := cli(t, "127.0.0.1:1", "", "resume", "gen_1", "--approve", "approval_1", "--output-schema", ticketSchema)
	if err == nil || !strings.Contains(err.Error(), "give it with --request or the agent's flags") {
		t.Errorf("resume with --output-schema alone: %v", err)
	}
}

// structuredGeneration is a Generate that records the start it gets and
// answers it with events: an answer the schema refuses, its repair, and
// the end, with answer as its structured answer (nil: none).
func structuredGeneration(got chan<- *agentdv1.StartGeneration, answer *structpb.Value) func(agentdv1.AgentService_GenerateServer) error {
	return func(s agentdv1.AgentService_GenerateServer) error {
		req, err := s.Recv()
		if err != nil {
			return err
		}
		got <- req.GetStart()
		for _, ev := range []*agentdv1.GenerateResponse{
			{Event: &agentdv1.GenerateResponse_Started{Started: &agentdv1.GenerationStarted{GenerationId: "gen_1"}}},
			{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: `{"title":"Checkout"}`}}},
			{Event: &agentdv1.GenerateResponse_OutputInvalid{OutputInvalid: &agentdv1.OutputInvalid{
				Turn: 1, Errors: []string{"/: missing properties: 'priority', 'tags'"}, Repair: true,
			}}},
			{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: `{"priority":"high","tags":["checkout","timeout"],"title":"Checkout times out"}`}}},
			{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{
				GenerationId: "gen_1", StopReason: agentdv1.StopReason_STOP_REASON_END_TURN, Structured: answer,
			}}},
		} {
			if err := s.Send(ev); err != nil {
				return err
			}
		}
		return nil
	}
}

func ticket(t *testing.T) *structpb.Value {
	t.Helper()
	v, err := structpb.NewValue(map[string]any{"title": "Checkout times out", "priority": "high", "tags": []any{"checkout", "timeout"}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// With an output schema, generate sends it as the agent's output and
// prints the structured answer alone on stdout, indented, while the
// events, and a warning for the answer the schema refused, go to
// stderr; --json keeps every event on stdout, the answer in its
// completed line, and warns on stderr. Without an output schema the
// answer follows the completed line. A generation that completes without
// the answer it was asked for is an error.
func TestGenerateStructuredAnswer(t *testing.T) {
	t.Parallel()
	got := make(chan *agentdv1.StartGeneration, 1)
	addr := serveFake(t, &fakeService{generate: structuredGeneration(got, ticket(t))})
	warning := "warning: the answer of turn 1 does not fit the output schema (a repair turn follows): /: missing properties: 'priority', 'tags'"

	out, errOut := mustCLI(t, addr, "", "generate", "--request", structuredStart, "--output-schema", ticketSchema)
	if out != ticketJSON {
		t.Errorf("stdout:\n%s\nwant only the answer:\n%s", out, ticketJSON)
	}
	wantLines(t, "stderr", errOut, "started gen_1\n", warning, "completed (end_turn, 0 tool turns)")
	if o := (<-got).GetAgent().GetOutput(); o.GetName() != "ticket" || o.GetSchema().GetFields()["required"] == nil {
		t.Errorf("the start's output: %v", o)
	}

	out, errOut = mustCLI(t, addr, "", "generate", "--json", "--request", structuredStart, "--output-schema", ticketSchema)
	<-got
	events := unmarshalLines(t, out, &agentdv1.GenerateResponse{})
	last := events[len(events)-1].(*agentdv1.GenerateResponse)
	if d := cmp.Diff(ticket(t), last.GetCompleted().GetStructured(), protocmp.Transform()); d != "" {
		t.Errorf("--json's completed line's answer (-want +got):\n%s", d)
	}
	wantLines(t, "--json's stderr", errOut, warning)

	out, _ = mustCLI(t, addr, "", "generate", "--request", structuredStart)
	<-got
	wantLines(t, "stdout without an output schema", out, "completed (end_turn, 0 tool turns)\n"+ticketJSON, warning)

	bare := serveFake(t, &fakeService{generate: structuredGeneration(got, nil)})
	out, _, err := cli(t, bare, "", "generate", "--request", structuredStart, "--output-schema", ticketSchema)
	<-got
	if err == nil || !strings.Contains(err.Error(), "generation gen_1 completed without a structured answer (end_turn)") || out != "" {
		t.Errorf("a generation without the answer: %v, stdout %q", err, out)
	}
}

// With agentd and the script provider: generate --output-schema prints
// the answer the schema accepted, which get shows too, and a script jq
// can read; an answer the schema refuses is repaired once, then the
// generation fails FAILED_PRECONDITION, OUTPUT_INVALID, each refusal
// printed as a warning.
func TestGenerateOutputSchema(t *testing.T) {
	t.Parallel()
	addr := serveDemo(t)
	out, errOut := mustCLI(t, addr, "", "generate", "--request", structuredStart, "--output-schema", ticketSchema)
	if out != ticketJSON {
		t.Errorf("stdout:\n%s\nwant only the answer:\n%s", out, ticketJSON)
	}
	wantLines(t, "stderr", errOut, "tool done echo (ok", "completed (end_turn, 1 tool turns)")
	var answer struct{ Title, Priority string }
	if err := json.Unmarshal([]byte(out), &answer); err != nil || answer.Priority != "high" {
		t.Errorf("the answer as JSON: %+v, %v", answer, err)
	}
	out, _ = mustCLI(t, addr, "", "get", genID.FindString(errOut))
	wantLines(t, "get", out, ` answer:   {"priority":"high","tags":["checkout","timeout"],"title":"Checkout times out"}`)

	unfit := filepath.Join(t.TempDir(), "unfit.json")
	if err := os.WriteFile(unfit, []byte(`{"agent": {"provider": "script", "providerOptions": {"script": {"turns": [{"structured": {"title": "Checkout"}}]}}},
		"messages": [{"role": "ROLE_USER", "parts": [{"text": "File a ticket."}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := cli(t, addr, "", "generate", "--request", unfit, "--output-schema", ticketSchema)
	if status.Code(err) != codes.FailedPrecondition || reasonOf(err) != "OUTPUT_INVALID" || out != "" {
		t.Errorf("an answer that never fits: %v (reason %q), stdout %q", err, reasonOf(err), out)
	}
	wantLines(t, "its stderr", errOut, "warning: the answer of turn 1 does not fit the output schema (a repair turn follows): ",
		"warning: the answer of turn 2 does not fit the output schema (no repair turn is left): ")
}

// reasonOf is the reason of err's ErrorInfo, if it has one.
func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}
