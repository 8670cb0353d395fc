package config

import (
	"iter"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// A setting is one key of the configuration, as the file writes it, with
// what its struct tags say of it. Besides yaml, a field's tags are:
//
//   - env: the AGENTD_* variable that sets it. On a struct-typed field,
//     a name ending in "_" is the prefix of its fields' variables (the
//     three TLS blocks share their fields' tags). ",dial" on a field
//     limits its variable to a TLS block that dials (bridge.tls: the
//     certificate authority and server name of `agentd serve`'s side),
//     ",dial" on a prefix says that the block dials.
//   - enum: the values a string (or each string of a list) may take,
//     comma-separated; a leading comma admits the empty string (unset).
//     Validation and the reference both read it.
//   - inherit: the key whose value applies while this one is unset (a
//     tenant's or a registered server's override).
//   - default: what an unset value means when Default() cannot say it
//     (computed at load time, or another component's default).
type setting struct {
	// key is the setting's path: "generation.lease_ttl";
	// "tenants.<name>.servers" beneath a map, "auth.oidc[].issuer"
	// beneath a list.
	key string
	// field is the struct field it decodes into, declared by owner.
	field reflect.StructField
	owner reflect.Type
	// env is its AGENTD_* variable, or "".
	env string
	// index leads from Config to the field through struct fields; nil
	// beneath a map, a list or a pointer, where no variable reaches.
	index []int
	// inherit is the key whose value an unset one takes, as the field's
	// tag or an enclosing field's says it ("limits.max_paused_generations"
	// for "tenants.<name>.limits.max_paused_generations").
	inherit string
}

// scope is where a walk over the configuration's types stands.
type scope struct {
	key, env, inherit string
	dial              bool
	index             []int
}

// walkSettings calls visit for every setting beneath struct type t,
// depth first in declaration order; a section's own setting (a struct,
// map or list field) comes before those within it.
func walkSettings(t reflect.Type, at scope, visit func(setting)) {
	for name, f := range keysOf(t) {
		s, inner := at.field(t, f, name)
		visit(s)
		walkInner(f.Type, inner, visit)
	}
}

// field is the setting of field f of t, named name in the file, and the
// scope beneath it.
func (at scope) field(t reflect.Type, f reflect.StructField, name string) (setting, scope) {
	s := setting{key: join(at.key, name), field: f, owner: t, inherit: f.Tag.Get("inherit")}
	if s.inherit == "" && at.inherit != "" {
		s.inherit = join(at.inherit, name)
	}
	inner := scope{key: s.key, inherit: s.inherit}
	if at.index != nil {
		s.index = append(append([]int(nil), at.index...), f.Index...)
		inner.index = s.index
	}
	s.env, inner.env, inner.dial = at.variables(f)
	return s, inner
}

// variables reads field f's env tag: the variable that sets it, or, for
// a section, the prefix of its fields' variables and whether it dials.
func (at scope) variables(f reflect.StructField) (name, prefix string, dial bool) {
	env, opt, _ := strings.Cut(f.Tag.Get("env"), ",")
	switch {
	case strings.HasSuffix(env, "_"):
		return "", at.env + env, opt == "dial"
	case env != "" && (opt != "dial" || at.dial):
		return at.env + env, at.env, at.dial
	}
	return "", at.env, at.dial
}

// walkInner walks the settings within a field of type t: a section's, a
// pointer's, a map entry's (key.<name>) or a list entry's (key[]).
func walkInner(t reflect.Type, at scope, visit func(setting)) {
	if isLeaf(t) {
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		at.index = nil
		walkInner(t.Elem(), at, visit)
	case reflect.Map:
		walkInner(t.Elem(), scope{key: at.key + ".<name>", inherit: suffixed(at.inherit, ".<name>")}, visit)
	case reflect.Slice:
		walkInner(t.Elem(), scope{key: at.key + "[]"}, visit)
	case reflect.Struct:
		walkSettings(t, at, visit)
	}
}

// suffixed is s+suffix, or "" when s is.
func suffixed(s, suffix string) string {
	if s == "" {
		return ""
	}
	return s + suffix
}

var (
	durationType    = reflect.TypeFor[time.Duration]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

// isLeaf reports whether a value of type t is written as one value or a
// list or map of values, not as a section of keys.
func isLeaf(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		return reflect.PointerTo(t).Implements(unmarshalerType)
	case reflect.Slice, reflect.Map:
		return isLeaf(t.Elem())
	}
	return true
}

// keysOf yields the keys of struct type t, in declaration order, with
// their fields.
func keysOf(t reflect.Type) iter.Seq2[string, reflect.StructField] {
	return func(yield func(string, reflect.StructField) bool) {
		for i := range t.NumField() {
			f := t.Field(i)
			if name := yamlName(f); name != "" && !yield(name, f) {
				return
			}
		}
	}
}

// yamlName is the key that field f has in the file, "" for none.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// join is the key name beneath parent.
func join(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// enum is the list of values field's enum tag admits, nil without one.
func enum(f reflect.StructField) []string {
	tag, ok := f.Tag.Lookup("enum")
	if !ok {
		return nil
	}
	return strings.Split(tag, ",")
}

// enumText is values as a message lists them: "debug, info, warn, error",
// with "or unset" when the empty string is among them.
func enumText(values []string) string {
	var named []string
	unset := false
	for _, v := range values {
		if v == "" {
			unset = true
			continue
		}
		named = append(named, v)
	}
	text := strings.Join(named, ", ")
	if unset {
		text += ", or unset"
	}
	return text
}

// fieldEnum is the enum of field name of struct type T.
func fieldEnum[T any](name string) []string {
	f, _ := reflect.TypeFor[T]().FieldByName(name)
	return enum(f)
}

// fillUnset sets every unset field of the struct *dst (zero, or an empty
// list) to its value in def.
func fillUnset[T any](dst *T, def T) {
	d, v := reflect.ValueOf(dst).Elem(), reflect.ValueOf(def)
	for i := range d.NumField() {
		if f := d.Field(i); f.IsZero() || f.Kind() == reflect.Slice && f.Len() == 0 {
			f.Set(v.Field(i))
		}
	}
}
