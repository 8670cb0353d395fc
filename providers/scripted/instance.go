package scripted

import (
	"encoding/json"
	"strings"

	"github.com/agentd/agentd/internal/fault"
)

// maxInstanceDepth bounds how many schemas an instance follows, down
// each path, so that a schema whose required properties or references
// lead back to itself still gives a value (null at the bound) rather
// than no answer at all.
const maxInstanceDepth = 32

// minimalInstance is the mock's answer to an output schema: the simplest
// value that fits it, the same every time. See the package comment for
// what it fills in.
func minimalInstance(schema json.RawMessage) (string, error) {
	var root any
	if err := json.Unmarshal(schema, &root); err != nil {
		return "", fault.Wrap(fault.Invalid, err, "mock provider: the output schema is not JSON")
	}
	v := instanceOf{root: root}.value(root, 0)
	// A value decoded from JSON encodes again.
	data, _ := json.Marshal(v)
	return string(data), nil
}

// instanceOf builds instances of the schemas within root, which its
// references ("#/$defs/name") point into.
type instanceOf struct{ root any }

// value is the instance of schema s: its const, else its first enum
// value, else that of the schema it refers to or of its first
// alternative (allOf, anyOf, oneOf), else the empty value of its type.
func (b instanceOf) value(s any, depth int) any {
	m, ok := s.(map[string]any)
	if !ok || depth >= maxInstanceDepth {
		return nil // a boolean schema, or a cycle: null
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if enum, _ := m["enum"].([]any); len(enum) > 0 {
		return enum[0]
	}
	if ref, ok := m["$ref"].(string); ok {
		return b.value(b.resolve(ref), depth+1)
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if list, _ := m[k].([]any); len(list) > 0 {
			return b.value(list[0], depth+1)
		}
	}
	return b.empty(m, depth)
}

// empty is the emptiest value of schema m's type: an object of its
// required properties, an array of its minItems items, "", 0, false, or
// null.
func (b instanceOf) empty(m map[string]any, depth int) any {
	switch typeOf(m) {
	case "object":
		return b.object(m, depth)
	case "array":
		n, _ := m["minItems"].(float64)
		items := make([]any, int(n))
		for i := range items {
			items[i] = b.value(m["items"], depth+1)
		}
		return items
	case "string":
		return ""
	case "number", "integer":
		return 0
	case "boolean":
		return false
	}
	return nil
}

// object is an object with m's required properties, each its schema's
// instance.
func (b instanceOf) object(m map[string]any, depth int) map[string]any {
	props, _ := m["properties"].(map[string]any)
	required, _ := m["required"].([]any)
	out := make(map[string]any, len(required))
	for _, r := range required {
		if name, ok := r.(string); ok {
			out[name] = b.value(props[name], depth+1)
		}
	}
	return out
}

// typeOf is a schema's type: its "type", the first of a list of types,
// else what its keywords imply (properties: an object, items: an array).
func typeOf(m map[string]any) string {
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		if len(t) > 0 {
			s, _ := t[0].(string)
			return s
		}
	}
	if _, ok := m["properties"]; ok {
		return "object"
	}
	if _, ok := m["items"]; ok {
		return "array"
	}
	return ""
}

// pointerEscapes undoes the escapes of a JSON pointer's tokens.
var pointerEscapes = strings.NewReplacer("~1", "/", "~0", "~")

// resolve follows a reference within the schema, a JSON pointer after
// "#"; nil (any value) for one that leads nowhere or out of the schema.
func (b instanceOf) resolve(ref string) any {
	pointer, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil
	}
	cur := b.root
	if pointer == "" {
		return cur
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		m, _ := cur.(map[string]any)
		cur = m[pointerEscapes.Replace(tok)]
	}
	return cur
}
