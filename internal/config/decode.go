package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decodeFile decodes a configuration file's YAML into cfg, over what cfg
// already holds, as yaml.v3 would with KnownFields, and records the line
// of every key it writes in src. It walks the YAML's node tree against
// cfg's types itself to report every problem at once in the user's
// terms: the file, the line, the key, and how to write it.
func decodeFile(data []byte, cfg *Config, src *sources) []error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return []error{syntaxError(src.file, err)}
	}
	if len(doc.Content) == 0 || doc.Content[0].ShortTag() == "!!null" {
		return nil // an empty file, or one that is null: the defaults
	}
	if root := doc.Content[0]; root.Kind != yaml.MappingNode {
		return []error{fmt.Errorf(`%s:%d: the file holds %s, not a map of keys; write one "key: value" line each`, src.file, root.Line, what(root))}
	}
	d := fileDecoder{src: src}
	d.value(doc.Content[0], reflect.ValueOf(cfg).Elem(), "")
	return d.errs
}

// yamlLine is where the YAML parser says its error is.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxError is err, the YAML parser's, as file:line: what.
func syntaxError(file string, err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%s:%s: %s", file, m[1], strings.TrimPrefix(err.Error(), m[0]))
	}
	return fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
}

// fileDecoder decodes one file's nodes, collecting its problems.
type fileDecoder struct {
	src  *sources
	errs []error
}

func (d *fileDecoder) bad(n *yaml.Node, key string, err error) {
	d.errs = append(d.errs, fmt.Errorf("%s:%d: %s: %w", d.src.file, n.Line, key, err))
}

// value decodes n into v, the value of key.
func (d *fileDecoder) value(n *yaml.Node, v reflect.Value, key string) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch {
	case n.ShortTag() == "!!null":
		null(v)
	case v.Addr().Type().Implements(unmarshalerType):
		// Its own UnmarshalYAML says what it takes (shared: false, true
		// or global).
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.bad(n, key, err)
		}
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.value(n, v.Elem(), key)
	default:
		d.byKind(n, v, key)
	}
}

// null decodes a null into v as yaml.v3 does: it empties a pointer, a
// list or a map, and leaves anything else as it is (its default).
func null(v reflect.Value) {
	if k := v.Kind(); k == reflect.Pointer || k == reflect.Slice || k == reflect.Map {
		v.SetZero()
	}
}

// byKind decodes n into v by v's kind: a section, a map, a list or a
// scalar.
func (d *fileDecoder) byKind(n *yaml.Node, v reflect.Value, key string) {
	switch v.Kind() {
	case reflect.Struct:
		d.section(n, v, key)
	case reflect.Map:
		d.mapping(n, v, key)
	case reflect.Slice:
		d.list(n, v, key)
	default:
		d.scalar(n, v, key)
	}
}

// what is what n is: a map, a list or a single value.
func what(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	}
	return "a single value"
}

// wrongType reports n, which is not of v's type. A scalar is quoted, and
// shapes the example, only where v takes a boolean, a number or a
// duration: a value written where a string, a list or a section belongs
// may be a secret (a token, a header's value, a URL's path), and the
// message never shows it.
func (d *fileDecoder) wrongType(n *yaml.Node, v reflect.Value, key string) {
	shown, raw := what(n), ""
	if n.Kind == yaml.ScalarNode && quotable(v.Type()) {
		shown, raw = strconv.Quote(n.Value), n.Value
	}
	d.bad(n, key, notA(shown, v.Type(), raw))
}

// quotable reports whether a value of type t may be quoted in a message:
// a boolean, a number or a duration, which no secret is.
func quotable(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint64, reflect.Uint32, reflect.Float64:
		return true
	}
	return false
}

// scalar decodes n into v, a string, boolean, integer or duration.
func (d *fileDecoder) scalar(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.ScalarNode || n.Decode(v.Addr().Interface()) != nil {
		d.wrongType(n, v, key)
	}
}

// section decodes mapping n into struct v, key by key.
func (d *fileDecoder) section(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.MappingNode {
		d.wrongType(n, v, key)
		return
	}
	fields := maps.Collect(keysOf(v.Type()))
	for _, p := range d.pairs(n, key) {
		at := join(key, p.key.Value)
		f, ok := fields[p.key.Value]
		if !ok {
			d.errs = append(d.errs, fmt.Errorf("%s:%d: %s", d.src.file, p.key.Line, unknownKey(at, v.Type())))
			continue
		}
		d.src.lines[at] = p.key.Line
		d.value(p.value, v.FieldByIndex(f.Index), at)
	}
}

// mapping decodes mapping n into map v, which it replaces: a map the file
// sets replaces its default (bridge.servers' registrations) rather than
// merging into it.
func (d *fileDecoder) mapping(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.MappingNode {
		d.wrongType(n, v, key)
		return
	}
	m := reflect.MakeMap(v.Type())
	for _, p := range d.pairs(n, key) {
		at := join(key, p.key.Value)
		d.src.lines[at] = p.key.Line
		e := reflect.New(v.Type().Elem()).Elem()
		d.value(p.value, e, at)
		m.SetMapIndex(reflect.ValueOf(p.key.Value), e)
	}
	v.Set(m)
}

// list decodes sequence n into slice v, which it replaces.
func (d *fileDecoder) list(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.SequenceNode {
		d.wrongType(n, v, key)
		return
	}
	s := reflect.MakeSlice(v.Type(), 0, len(n.Content))
	keepsNull := slices.Contains([]reflect.Kind{reflect.Pointer, reflect.Map, reflect.Slice}, v.Type().Elem().Kind())
	for i, item := range n.Content {
		if item.ShortTag() == "!!null" && !keepsNull {
			continue // a null item of a list of values or sections is none, as yaml.v3 has it
		}
		at := fmt.Sprintf("%s[%d]", key, i)
		d.src.lines[at] = item.Line
		s = reflect.Append(s, reflect.New(v.Type().Elem()).Elem())
		d.value(item, s.Index(s.Len()-1), at)
	}
	v.Set(s)
}

// A pair is one key of a mapping and its value.
type pair struct{ key, value *yaml.Node }

// pairs are mapping n's pairs: its own, then those that its merge keys
// (<<: *base) bring and it does not set itself, as YAML merges them. A
// key set twice is reported, and its second value dropped.
func (d *fileDecoder) pairs(n *yaml.Node, key string) []pair {
	var own, merged []pair
	seen := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.merged(v, key)...)
			continue
		}
		if first, ok := seen[k.Value]; ok {
			d.bad(k, join(key, k.Value), fmt.Errorf("set twice (first on line %d)", first))
			continue
		}
		seen[k.Value] = k.Line
		own = append(own, pair{k, v})
	}
	for _, p := range merged {
		if _, ok := seen[p.key.Value]; !ok {
			seen[p.key.Value] = p.key.Line
			own = append(own, p)
		}
	}
	return own
}

// merged are the pairs a merge key's value brings: a mapping's, or those
// of a list of mappings, the earlier ones first.
func (d *fileDecoder) merged(n *yaml.Node, key string) []pair {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		return d.pairs(n, key)
	case yaml.SequenceNode:
		var out []pair
		for _, m := range n.Content {
			out = append(out, d.merged(m, key)...)
		}
		return out
	}
	d.bad(n, join(key, "<<"), errors.New("merges only a map or a list of maps"))
	return nil
}
