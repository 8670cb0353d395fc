package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// agentFlags declare the agent: --request's file, or --provider, --model,
// --instructions and the --mcp servers; --output-schema, with either,
// asks for its answer as JSON.
type agentFlags struct {
	fs                                     *flag.FlagSet
	request, provider, model, instructions string
	mcps                                   mcpFlags
	approval                               approvalFlag
	outputSchema                           string
}

// agentFlagNames are the agent's flags, in the order a command that
// repeats them prints them.
var agentFlagNames = []string{"request", "provider", "model", "instructions", "mcp", "require-approval"}

func (a *agentFlags) register(fs *flag.FlagSet) {
	a.fs = fs
	a.approval = approvalFlag(agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS)
	fs.StringVar(&a.request, "request", "", "a `file` holding a StartGeneration in JSON (the proto JSON mapping): the agent and the messages, instead of --provider, --model, --instructions and --mcp")
	fs.StringVar(&a.provider, "provider", "mock", "the provider: mock, script, openai, anthropic, ollama, ... (as agentd serves them)")
	fs.StringVar(&a.model, "model", "", "the model, as the provider names it")
	fs.StringVar(&a.instructions, "instructions", "", "system instructions for the model")
	fs.Var(&a.mcps, "mcp", "an MCP server, `NAME=COMMAND|URL` (a command line, split as a shell splits one, or a URL), or NAME alone, a server registered in agentd's configuration (repeatable)")
	fs.Var(&a.approval, "require-approval", "whether the tool calls of the --mcp servers wait for your approval: `always|never`")
}

// registerOutput adds --output-schema, for the commands whose output can
// be the structured answer alone.
func (a *agentFlags) registerOutput(fs *flag.FlagSet) {
	fs.StringVar(&a.outputSchema, "output-schema", "", "a `file` holding a JSON Schema (an object schema, in JSON): the agent's answer must be JSON that fits it, which is printed alone on stdout (the events go to stderr); with --request or the agent's flags")
}

// given reports whether the command line declared an agent.
func (a *agentFlags) given() bool {
	for _, name := range agentFlagNames {
		if flagSet(a.fs, name) {
			return true
		}
	}
	return false
}

// agent is the agent declared: --request's, the flags', or nil when the
// command line declares none.
func (a *agentFlags) agent() (*agentdv1.Agent, error) {
	switch {
	case a.request != "":
		start, err := a.fromFile()
		return start.GetAgent(), err
	case a.given():
		return a.withOutput(a.fromFlags())
	case a.outputSchema != "":
		return nil, errors.New("--output-schema is part of the agent: give it with --request or the agent's flags")
	}
	return nil, nil
}

// start is the generation's start: --request's file, else prompt to the
// agent of the flags.
func (a *agentFlags) start(prompt string) (*agentdv1.StartGeneration, error) {
	if a.request != "" {
		if prompt != "" {
			return nil, errors.New("--request holds the messages too: give --prompt only without it")
		}
		return a.fromFile()
	}
	if prompt == "" {
		return nil, errors.New("give --prompt (with --provider, --model and any --mcp), or --request FILE")
	}
	agent, err := a.withOutput(a.fromFlags())
	if err != nil {
		return nil, err
	}
	return &agentdv1.StartGeneration{Agent: agent, Messages: []*agentdv1.Message{userMessage(prompt)}}, nil
}

// userMessage is the user's message of text.
func userMessage(text string) *agentdv1.Message {
	return &agentdv1.Message{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: text}}}}
}

// fromFile reads --request, refusing the flags it replaces; an
// --output-schema replaces the file's agent's output.
func (a *agentFlags) fromFile() (*agentdv1.StartGeneration, error) {
	for _, name := range agentFlagNames[1:] {
		if flagSet(a.fs, name) {
			return nil, fmt.Errorf("--request holds the agent: give --%s only without it", name)
		}
	}
	data, err := os.ReadFile(a.request)
	if err != nil {
		return nil, err
	}
	start := &agentdv1.StartGeneration{}
	if err := protojson.Unmarshal(data, start); err != nil {
		return nil, fmt.Errorf("%s: %w", a.request, err)
	}
	if start.GetAgent() != nil {
		if _, err := a.withOutput(start.GetAgent()); err != nil {
			return nil, err
		}
	}
	return start, nil
}

// outputName is what Output.name takes.
var outputName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// withOutput sets agent's output to --output-schema's, if given, and
// returns agent. The schema is named after its file, up to the first
// dot (ticket.schema.json: ticket), where that is a name Output.name
// takes; "answer" otherwise.
func (a *agentFlags) withOutput(agent *agentdv1.Agent) (*agentdv1.Agent, error) {
	if a.outputSchema == "" {
		return agent, nil
	}
	data, err := os.ReadFile(a.outputSchema)
	if err != nil {
		return nil, fmt.Errorf("--output-schema: %w", err)
	}
	schema := &structpb.Struct{}
	if err := protojson.Unmarshal(data, schema); err != nil {
		return nil, fmt.Errorf("--output-schema %s: want a JSON Schema, a JSON object: %w", a.outputSchema, err)
	}
	name, _, _ := strings.Cut(filepath.Base(a.outputSchema), ".")
	if !outputName.MatchString(name) {
		name = "answer"
	}
	agent.Output = &agentdv1.Output{Name: name, Schema: schema}
	return agent, nil
}

// fromFlags is the agent of --provider, --model, --instructions and
// --mcp, each server's calls gated as --require-approval says.
func (a *agentFlags) fromFlags() *agentdv1.Agent {
	for _, s := range a.mcps.servers {
		s.RequireApproval = &agentdv1.ApprovalPolicy{Mode: agentdv1.ApprovalMode(a.approval)}
	}
	return &agentdv1.Agent{Provider: a.provider, Model: a.model, Instructions: a.instructions, Mcps: a.mcps.servers}
}

// args are the agent's flags as the command line gave them, for a command
// printed for the person to type next.
func (a *agentFlags) args() []string {
	var args []string
	for _, name := range agentFlagNames {
		if !flagSet(a.fs, name) {
			continue
		}
		switch name {
		case "mcp":
			for i, spec := range a.mcps.specs {
				args = append(args, "--mcp", shownSpec(spec, a.mcps.servers[i]))
			}
		default:
			args = append(args, "--"+name, a.fs.Lookup(name).Value.String())
		}
	}
	if a.outputSchema != "" {
		args = append(args, "--output-schema", a.outputSchema)
	}
	return args
}

// approvalFlag is --require-approval: always or never.
type approvalFlag agentdv1.ApprovalMode

func (m *approvalFlag) String() string {
	if m == nil || *m == 0 {
		return ""
	}
	return enumWord(agentdv1.ApprovalMode(*m).String(), "APPROVAL_MODE_")
}

func (m *approvalFlag) Set(v string) error {
	mode, ok := agentdv1.ApprovalMode_value["APPROVAL_MODE_"+strings.ToUpper(v)]
	if !ok || mode == 0 {
		return errors.New("want always or never")
	}
	*m = approvalFlag(mode)
	return nil
}
