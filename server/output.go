package server

import (
	"context"
	"encoding/json"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/output"
	"github.com/agentd/agentd/internal/toolerror"
	"github.com/agentd/agentd/providers"
)

// strictProviders hold an answer to its schema exactly when asked to
// (strict), and restrict the schemas they take so: every object closed,
// every property required.
var strictProviders = map[string]bool{"openai": true, "openai-responses": true, "azure": true, "openrouter": true, "requesty": true}

// planOutput checks the agent's output schema, if it has one.
func (s *Service) planOutput(v *violations, field func(string) string, p *plan) {
	o := p.agent.GetOutput()
	if o == nil {
		return
	}
	name := p.agent.GetProvider()
	if p.provider != nil {
		name, _ = pricedAs(p.provider, name, p.agent.GetModel())
	}
	spec, bad := output.Parse(o, field("agent.output"), strictProviders[name])
	*v = append(*v, bad...)
	p.output = spec
	for _, t := range p.agent.GetTools() {
		if t.GetName() == output.ToolName {
			v.add(field("agent.tools"), "a tool named %q would clash with the tool that takes the answer where the provider takes no output schema; rename it", output.ToolName)
		}
	}
}

// nativeOutput reports whether the provider takes the output schema in
// its own API's field on a turn that offers tools (withTools) or none.
func (p *plan) nativeOutput(withTools bool) bool {
	out := p.provider.Capabilities().Output
	return out != nil && out(p.agent.GetModel(), withTools)
}

// withOutput puts the agent's output schema into req, a turn's request:
// in the API's own field where the provider takes it, else as the
// final_answer tool beside the others.
func (g *generation) withOutput(req *providers.Request) *providers.Request {
	spec := g.plan.output
	if spec == nil {
		return req
	}
	if g.plan.nativeOutput(len(req.Tools) > 0) {
		req.Output = spec.Provider()
		return req
	}
	req.Tools = append(req.Tools[:len(req.Tools):len(req.Tools)], spec.Tool())
	if len(req.ToolParameters) == len(g.tools) && req.ToolParameters != nil {
		req.ToolParameters = append(req.ToolParameters[:len(req.ToolParameters):len(req.ToolParameters)], spec.Schema())
	}
	return req
}

// answerOf finds the answer of r, the model's turn, when the agent asks
// for structured output: its final_answer call's arguments, or its text
// when it called no tool. ok is false for a turn that goes on to its
// tools (or back to the provider).
func answerOf(r *reply) (answer string, viaTool *agentdv1.ToolCall, ok bool) {
	for _, c := range r.calls {
		if c.GetName() == output.ToolName {
			return c.GetArguments(), c, true
		}
	}
	if len(r.calls) > 0 || r.paused {
		return "", nil, false
	}
	var b strings.Builder
	for _, p := range r.message.GetParts() {
		b.WriteString(p.GetText())
	}
	return b.String(), nil, true
}

// takeOutput takes r's answer when the agent asks for structured output
// and r gives one: checked against the schema, the generation completes
// with it; refused, a repair turn follows (the errors go to the model),
// or, with none left, the generation fails. handled is false where the
// loop goes on as without an output schema; done says the generation
// ended, with err.
func (g *generation) takeOutput(ctx context.Context, r *reply) (handled, done bool, err error) {
	spec := g.plan.output
	if spec == nil {
		return false, false, nil
	}
	answer, viaTool, ok := answerOf(r)
	if !ok {
		return false, false, nil
	}
	var value *structpb.Value
	var errs []string
	if r.stop == agentdv1.StopReason_STOP_REASON_CONTENT_FILTER {
		errs = []string{"the model refused to answer, or its answer was filtered"}
	} else {
		value, errs = spec.Check(answer)
	}
	if viaTool != nil {
		g.answerCalls(r.calls, viaTool, errs)
	}
	if len(errs) == 0 {
		g.structured = value
		return true, true, g.complete(ctx, r)
	}
	repair := g.outputRepairs < spec.Repairs() && r.stop != agentdv1.StopReason_STOP_REASON_CONTENT_FILTER
	if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_OutputInvalid{OutputInvalid: &agentdv1.OutputInvalid{
		Turn: int32(g.ran.turns), Errors: errs, Repair: repair,
	}}}); err != nil {
		return true, true, err
	}
	if !repair {
		return true, true, outputInvalid(errs, answer)
	}
	g.outputRepairs++
	if viaTool == nil {
		g.appendMessage(&agentdv1.Message{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: output.RepairPrompt(errs, false)}}}})
	}
	g.checkpoint(nil)
	return true, false, nil
}

// answerCalls answers the calls of a turn that called final_answer:
// final_answer with the schema's verdict, the others with a result
// saying they did not run, the answer having been given, so that the
// conversation (and its thread) stays whole.
func (g *generation) answerCalls(calls []*agentdv1.ToolCall, final *agentdv1.ToolCall, errs []string) {
	parts := make([]*agentdv1.Part, len(calls))
	for i, c := range calls {
		res := &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName()}
		switch {
		case c != final:
			res.Output, res.IsError = toolerror.JSON("not run: the final answer was given in the same turn"), true
		case len(errs) > 0:
			res.Output, res.IsError = output.RepairPrompt(errs, true), true
		default:
			res.Output = `{"accepted":true}`
		}
		parts[i] = &agentdv1.Part{Kind: &agentdv1.Part_ToolResult{ToolResult: res}}
	}
	g.appendMessage(&agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: parts})
}

// maxAnswerShown bounds the answer an OUTPUT_INVALID error carries.
const maxAnswerShown = 4096

// outputInvalid fails a generation whose last answer, answer, the schema
// refused for errs, no repair turn being left.
func outputInvalid(errs []string, answer string) error {
	if len(answer) > maxAnswerShown {
		answer = answer[:maxAnswerShown]
	}
	joined, _ := json.Marshal(errs)
	return fault.New(fault.FailedPrecondition, "the model's answer does not fit the agent's output schema, and no repair turn is left: %s",
		strings.Join(errs, "; ")).WithInfo("OUTPUT_INVALID", map[string]string{"errors": string(joined), "answer": answer})
}

// outputPreview is how the provider would take the agent's output
// schema, for Preview.
func (p *plan) outputPreview() *agentdv1.OutputPreview {
	if p.output == nil || p.provider == nil {
		return nil
	}
	return &agentdv1.OutputPreview{NativeWithTools: p.nativeOutput(true), NativeWithoutTools: p.nativeOutput(false), FinalAnswer: p.output.Tool()}
}
