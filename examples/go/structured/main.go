// Command structured asks for the final answer as data, and decodes it
// into a Go struct:
//
//	go run ./examples/go/structured [flags] [address] [request.json]
//
// The agent in examples/structured-start.json calls the demo server's
// echo tool, then answers; this example sets its output (Agent.output) to
// a Ticket's JSON Schema, so the answer must be JSON that fits it, which
// agentd checks and sends in the completed event (GenerationCompleted.
// structured, a google.protobuf.Value). An answer the schema refuses
// arrives as output_invalid, and the model gets a turn to repair it. Its
// flags (--token, --tls-ca, --tls-cert, --tls-key) are every example's:
// see examples/go/internal/connect.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentd/agentd/examples/go/internal/connect"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// Ticket is the answer asked for.
type Ticket struct {
	Title    string   `json:"title"`
	Priority string   `json:"priority"`
	Tags     []string `json:"tags"`
}

// ticketSchema is Ticket's JSON Schema. It keeps the rules of the
// providers that hold a model to a schema exactly (every object closed,
// every property required), so Output.strict can ask them to.
const ticketSchema = `{
  "type": "object",
  "properties": {
    "title": {"type": "string", "description": "The problem, in a few words."},
    "priority": {"type": "string", "enum": ["low", "medium", "high"]},
    "tags": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["title", "priority", "tags"],
  "additionalProperties": false
}`

func main() {
	o, file := connect.Parse("examples/structured-start.json")
	if err := run(o, file, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "go structured example:", o.Explain(err))
		os.Exit(1)
	}
}

func run(o connect.Options, file string, out io.Writer) error {
	start, err := connect.ReadStart(file)
	if err != nil {
		return err
	}
	schema := &structpb.Struct{}
	if err := protojson.Unmarshal([]byte(ticketSchema), schema); err != nil {
		return err
	}
	start.Agent.Output = &agentdv1.Output{Name: "ticket", Description: "A ticket filed from the user's report.", Schema: schema, Strict: true}
	conn, err := o.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := connect.Start(ctx, conn, start)
	if err != nil {
		return err
	}
	var ticket *Ticket
	if err := connect.Each(stream, func(ev *agentdv1.GenerateResponse) (err error) {
		if c := ev.GetCompleted(); c != nil {
			ticket, err = decode(c.GetStructured())
			return err
		}
		printEvent(out, ev)
		return nil
	}); err != nil {
		return err
	}
	if ticket == nil {
		return errors.New("the generation did not complete")
	}
	fmt.Fprintf(out, "ticket: [%s] %s (%s)\n", ticket.Priority, ticket.Title, strings.Join(ticket.Tags, ", "))
	return nil
}

// decode decodes the structured answer into a Ticket: the Value as JSON,
// then encoding/json.
func decode(v *structpb.Value) (*Ticket, error) {
	if v == nil {
		return nil, errors.New("the generation completed without a structured answer")
	}
	data, err := protojson.Marshal(v)
	if err != nil {
		return nil, err
	}
	var t Ticket
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("the answer is not a ticket: %w", err)
	}
	return &t, nil
}

// printEvent prints the events that say what the generation did on its
// way to the answer.
func printEvent(out io.Writer, ev *agentdv1.GenerateResponse) {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_Started:
		fmt.Fprintln(out, "started", k.Started.GetGenerationId())
	case *agentdv1.GenerateResponse_ToolCallFinished:
		fmt.Fprintln(out, "tool_call_finished", k.ToolCallFinished.GetToolName(), k.ToolCallFinished.GetOutput())
	case *agentdv1.GenerateResponse_OutputInvalid:
		fmt.Fprintf(out, "output_invalid turn %d (repair %t): %s\n", k.OutputInvalid.GetTurn(), k.OutputInvalid.GetRepair(), strings.Join(k.OutputInvalid.GetErrors(), "; "))
	}
}
