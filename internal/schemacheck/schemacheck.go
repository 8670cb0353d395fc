// Package schemacheck checks that a document is a JSON Schema: valid
// against its meta-schema (2020-12, or the draft its "$schema" declares),
// with a maintained library (santhosh-tekuri/jsonschema); and, once
// compiled, that a value fits it. It owns those checks and how their
// problems are named: the path within the document or the value, and what
// is wrong there. A schema may refer only to itself: nothing outside the
// document is ever loaded (no file, no URL).
package schemacheck

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Problem is one way a document fails to be a JSON Schema.
type Problem struct {
	// Path is where, from the document's root: ".properties.q.type",
	// "[0]"; "" for the root itself.
	Path string
	// Description says what is wrong, for people.
	Description string
}

// maxProblems bounds the problems reported for one document.
const maxProblems = 8

// Check returns the ways doc (a document as encoding/json decodes it:
// maps, slices, strings, float64 or json.Number, bools, nil) fails to be
// a JSON Schema; none when it is one.
func Check(doc any) []Problem {
	_, probs := Compile(doc)
	return probs
}

// Schema is a compiled JSON Schema: safe for concurrent use.
type Schema struct{ s *jsonschema.Schema }

// Compile compiles doc (as Check takes it), or returns the ways it fails
// to be a JSON Schema.
func Compile(doc any) (*Schema, []Problem) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuse{})
	const loc = "urn:agentd:schema"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, []Problem{{Description: err.Error()}}
	}
	sch, err := c.Compile(loc)
	if err == nil {
		return &Schema{s: sch}, nil
	}
	return nil, schemaProblems(err)
}

// Validate returns the ways v (as encoding/json decodes a document)
// does not fit s, each at its path within v; none when it fits.
func (s *Schema) Validate(v any) []Problem {
	err := s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		return problems(ve)
	}
	return []Problem{{Description: describe(err.Error())}}
}

// schemaProblems are the problems of a compilation's error.
func schemaProblems(err error) []Problem {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		return problems(ve)
	}
	return []Problem{{Description: describe(err.Error())}}
}

// problems are the leaves of a validation error, in path order, one per
// path, at most maxProblems.
func problems(ve *jsonschema.ValidationError) []Problem {
	var out []Problem
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, Problem{Path: path(e.InstanceLocation), Description: e.ErrorKind.LocalizedString(printer)})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.SortStableFunc(out, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
	// One problem per path: a keyword that may take several forms (type:
	// a name or a list of names) fails once for each.
	merged := out[:0]
	for _, p := range out {
		if n := len(merged); n > 0 && merged[n-1].Path == p.Path {
			if !strings.Contains(merged[n-1].Description, p.Description) {
				merged[n-1].Description += "; or " + p.Description
			}
			continue
		}
		merged = append(merged, p)
	}
	return merged[:min(len(merged), maxProblems)]
}

var printer = message.NewPrinter(language.English)

// path writes a location within the document as the field paths of
// agentd's errors write it: ".name" for a member, "[i]" for an element.
func path(loc []string) string {
	var b strings.Builder
	for _, seg := range loc {
		if _, err := strconv.Atoi(seg); err == nil {
			fmt.Fprintf(&b, "[%s]", seg)
			continue
		}
		b.WriteString(".")
		b.WriteString(seg)
	}
	return b.String()
}

// describe drops the library's own location prefix from a message.
func describe(msg string) string {
	if _, rest, ok := strings.Cut(msg, "urn:agentd:schema"); ok {
		return strings.TrimLeft(rest, "#: ")
	}
	return msg
}

// refuse loads nothing: a schema refers only to itself.
type refuse struct{}

func (refuse) Load(url string) (any, error) {
	return nil, fmt.Errorf("a schema may refer only to itself, not to %s", url)
}
