// Package output holds an agent's output schema (agentd.v1.Output): it
// checks the schema once, before anything connects (a JSON Schema, an
// object's, and, where the provider holds answers to it strictly, within
// that provider's restrictions), and then checks each answer against it
// (JSON Schema 2020-12, with a maintained library, whatever the provider
// enforced). It also makes what the providers are given: the schema for
// an API's own field, or the final_answer tool the loop offers where a
// provider takes none.
package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/schemacheck"
	"github.com/agentd/agentd/providers"
)

// ToolName names the tool that takes the answer where the provider takes
// no schema: the model answers by calling it.
const ToolName = "final_answer"

// DefaultName names a schema whose output names none.
const DefaultName = "answer"

// MaxRepairs bounds Output.repair_turns; DefaultRepairs is its default.
const (
	MaxRepairs     = 5
	DefaultRepairs = 1
)

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Spec is an output schema, checked: safe for concurrent use.
type Spec struct {
	name, description string
	strict            bool
	repairs           int
	encoded           json.RawMessage
	schema            *schemacheck.Schema
}

// Parse checks o, naming each problem under field (e.g.
// "start.agent.output"); strictRules says the provider holds answers to
// the schema strictly, so a strict schema must keep its restrictions.
func Parse(o *agentdv1.Output, field string, strictRules bool) (*Spec, []fault.Violation) {
	var bad []fault.Violation
	add := func(f, format string, args ...any) {
		bad = append(bad, fault.Violation{Field: field + f, Description: fmt.Sprintf(format, args...)})
	}
	s := &Spec{name: o.GetName(), description: o.GetDescription(), strict: o.GetStrict(), repairs: DefaultRepairs}
	if s.name == "" {
		s.name = DefaultName
	}
	if !namePattern.MatchString(s.name) {
		add(".name", "must be 1 to 64 of a-z, A-Z, 0-9, _ and -")
	}
	if o.RepairTurns != nil {
		if n := o.GetRepairTurns(); n < 0 || n > MaxRepairs {
			add(".repair_turns", "must be 0..%d, got %d", MaxRepairs, n)
		}
		s.repairs = int(o.GetRepairTurns())
	}
	doc := o.GetSchema().AsMap()
	switch {
	case o.GetSchema() == nil:
		add(".schema", "is required: the JSON Schema of the answer")
	case doc["type"] != "object":
		add(".schema.type", `must be "object": the providers take an object's schema`)
	default:
		sch, probs := schemacheck.Compile(doc)
		for _, p := range probs {
			add(".schema"+p.Path, "%s", p.Description)
		}
		if s.strict && strictRules {
			for _, p := range strictProblems(doc, "") {
				add(".schema"+p.Path, "%s", p.Description)
			}
		}
		s.schema = sch
		s.encoded, _ = json.Marshal(doc)
	}
	if len(bad) > 0 {
		return nil, bad
	}
	return s, nil
}

// strictProblems are the places where schema, at path, passes a strict
// provider's restrictions: every object sets additionalProperties false
// and requires all its properties.
func strictProblems(schema map[string]any, path string) []schemacheck.Problem {
	var out []schemacheck.Problem
	if props, ok := schema["properties"].(map[string]any); ok || schema["type"] == "object" {
		if schema["additionalProperties"] != false {
			out = append(out, schemacheck.Problem{Path: path + ".additionalProperties", Description: "a strict schema's every object must set additionalProperties false"})
		}
		required := map[string]bool{}
		if list, ok := schema["required"].([]any); ok {
			for _, r := range list {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(props)) {
			if !required[name] {
				out = append(out, schemacheck.Problem{Path: path + ".required", Description: fmt.Sprintf("a strict schema's every object must require all its properties; %q is not required", name)})
			}
			if sub, ok := props[name].(map[string]any); ok {
				out = append(out, strictProblems(sub, path+".properties."+name)...)
			}
		}
	}
	for _, key := range []string{"items", "additionalItems"} {
		if sub, ok := schema[key].(map[string]any); ok {
			out = append(out, strictProblems(sub, path+"."+key)...)
		}
	}
	for _, key := range []string{"anyOf", "allOf", "oneOf", "prefixItems"} {
		if list, ok := schema[key].([]any); ok {
			for i, item := range list {
				if sub, ok := item.(map[string]any); ok {
					out = append(out, strictProblems(sub, fmt.Sprintf("%s.%s[%d]", path, key, i))...)
				}
			}
		}
	}
	for _, key := range []string{"$defs", "definitions"} {
		if defs, ok := schema[key].(map[string]any); ok {
			for _, name := range slices.Sorted(maps.Keys(defs)) {
				if sub, ok := defs[name].(map[string]any); ok {
					out = append(out, strictProblems(sub, path+"."+key+"."+name)...)
				}
			}
		}
	}
	return out
}

// Repairs is how many repair turns an answer the schema refuses gets.
func (s *Spec) Repairs() int { return s.repairs }

// Provider is the schema as an adapter sends it in its API's own field.
func (s *Spec) Provider() *providers.Output {
	return &providers.Output{Name: s.name, Description: s.description, Schema: s.encoded, Strict: s.strict}
}

// Tool is the final_answer tool: its parameters are the schema.
func (s *Spec) Tool() *agentdv1.FunctionTool {
	params, _ := structpb.NewStruct(nil)
	_ = protojson.Unmarshal(s.encoded, params)
	desc := "Give your final answer by calling this tool, once you have done everything else, with the answer as its arguments."
	if s.description != "" {
		desc += " The answer: " + s.description
	}
	return &agentdv1.FunctionTool{Name: ToolName, Description: desc, Parameters: params}
}

// Schema is the schema, encoded.
func (s *Spec) Schema() json.RawMessage { return s.encoded }

// Check reads answer, a model's answer as JSON text, and checks it
// against the schema: the value it holds, or what is wrong with it, each
// with its place in the answer.
func (s *Spec) Check(answer string) (*structpb.Value, []string) {
	text := unfenced(strings.TrimSpace(answer))
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, []string{"the answer is not JSON: " + err.Error()}
	}
	if dec.More() {
		return nil, []string{"the answer holds more than one JSON value"}
	}
	var errs []string
	for _, p := range s.schema.Validate(doc) {
		at := p.Path
		if at == "" {
			at = "the answer"
		}
		errs = append(errs, at+": "+p.Description)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	v := &structpb.Value{}
	if err := protojson.Unmarshal([]byte(text), v); err != nil {
		return nil, []string{"the answer is not JSON: " + err.Error()}
	}
	return v, nil
}

// unfenced is text without the Markdown code fence some models put
// around JSON (```json ... ```).
func unfenced(text string) string {
	body, ok := strings.CutPrefix(text, "```")
	if !ok {
		return text
	}
	if _, rest, found := strings.Cut(body, "\n"); found {
		body = rest
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(body), "```"))
}

// RepairPrompt is what a repair turn tells the model: why its answer was
// refused, and what to do.
func RepairPrompt(errs []string, viaTool bool) string {
	var b bytes.Buffer
	b.WriteString("Your answer does not fit the required JSON Schema:\n")
	for _, e := range errs {
		b.WriteString("- " + e + "\n")
	}
	if viaTool {
		b.WriteString("Call " + ToolName + " again with an answer that fits it.")
	} else {
		b.WriteString("Answer again with only the JSON value, fitting the schema.")
	}
	return b.String()
}
