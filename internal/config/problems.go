package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sources says where each key's value was written, so that a problem can
// say where to fix it.
type sources struct {
	// file is the file's path as given.
	file string
	// lines are the lines of the keys (and list entries) the file writes.
	lines map[string]int
	// env names the variable that set a key, over the file.
	env map[string]string
}

func newSources(file string) *sources {
	return &sources{file: file, lines: make(map[string]int), env: make(map[string]string)}
}

// locate returns msg, which begins with key, after where key's value was
// written: the variable that set it ("AGENTD_LISTEN: listen: ..."), or
// the file and line ("agentd.yaml:12: generation.lease_ttl: ..."): the
// key's own line, or, for a key the file leaves out (a required one), the
// nearest enclosing key's.
func (s *sources) locate(key, msg string) string {
	if s == nil {
		return msg
	}
	if name, ok := s.env[key]; ok {
		return name + ": " + msg
	}
	for k := key; k != ""; k = parentKey(k) {
		if line, ok := s.lines[k]; ok {
			return fmt.Sprintf("%s:%d: %s", s.file, line, msg)
		}
	}
	return msg
}

// parentKey is the key that encloses key: "a.b" of "a.b.c" and of
// "a.b[2]", "" of a top-level key.
func parentKey(key string) string {
	i := strings.LastIndexAny(key, ".[")
	if i < 0 {
		return ""
	}
	return key[:i]
}

// problems collects what is wrong with a configuration. Every message
// begins with the key it is about ("store.dsn: required ..."), which
// locates it in src.
type problems struct {
	src  *sources
	errs []error
}

// bad records a problem.
func (p *problems) bad(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	key, _, _ := strings.Cut(msg, ": ")
	p.errs = append(p.errs, errors.New(p.src.locate(key, msg)))
}

// positive reports key's duration d unless it is positive.
func positive(bad func(string, ...any), key string, d time.Duration) {
	if d <= 0 {
		bad("%s: must be positive, got %s", key, d)
	}
}

// err is every problem recorded, or nil.
func (p *problems) err() error { return errors.Join(p.errs...) }

// notA says that a value (shown as written: `"30"`, or "a list") is not
// of type t, and how to write one; raw, the text written, if it was one
// value, shapes the example (30 for a duration: 30s).
func notA(shown string, t reflect.Type, raw string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return fmt.Errorf("%s is not %s; write %s", shown, typeName(t), howToWrite(t, raw))
}

// kindNames are what values of each kind are, in the user's words.
var kindNames = map[reflect.Kind]string{
	reflect.Bool: "a boolean", reflect.Int: "an integer", reflect.String: "a string",
	reflect.Slice: "a list", reflect.Map: "a map", reflect.Struct: "a section",
}

// typeName is what a value of type t is, in the user's words.
func typeName(t reflect.Type) string {
	if t == durationType {
		return "a duration"
	}
	return kindNames[t.Kind()]
}

// kindExamples are how to write a value of each kind.
var kindExamples = map[reflect.Kind]string{
	reflect.Bool:   "true or false",
	reflect.Int:    "a whole number, without quotes or units",
	reflect.String: "one value",
	reflect.Map:    `one "name:" line per entry, indented beneath it, with its keys beneath that`,
	reflect.Struct: `its keys indented beneath it, one "key: value" line each`,
}

// howToWrite is how to write a value of type t instead of raw.
func howToWrite(t reflect.Type, raw string) string {
	switch {
	case t == durationType:
		if _, err := strconv.ParseFloat(raw, 64); err == nil {
			return raw + "s"
		}
		return "a number and a unit, e.g. 30s, 5m or 1h"
	case t.Kind() == reflect.Slice:
		return howToWriteList(t, raw)
	case t.Kind() == reflect.Map && isLeaf(t.Elem()):
		return `one "NAME: value" line per entry, indented beneath it`
	}
	return kindExamples[t.Kind()]
}

// howToWriteList is how to write a list of type t instead of raw.
func howToWriteList(t reflect.Type, raw string) string {
	switch {
	case !isLeaf(t.Elem()):
		return `one "- " entry per item, indented beneath it, with its keys`
	case raw != "":
		return "[" + raw + "]"
	}
	return `[a, b], or one "- item" line per item`
}

// unknownKey is the message for a key that a section of type t does not
// have.
func unknownKey(key string, t reflect.Type) string {
	var known []string
	for k := range keysOf(t) {
		known = append(known, k)
	}
	name := key[strings.LastIndex(key, ".")+1:]
	msg := key + ": unknown key"
	if near, ok := closest(name, known); ok {
		msg += fmt.Sprintf("; did you mean %q?", near)
	}
	return msg
}

// closest is the candidate nearest to name, when it is near enough to be
// a likely misspelling of it: at most a third of name's letters apart
// (one for short names), case aside. Ties go to the earlier candidate.
func closest(name string, candidates []string) (string, bool) {
	best, most := "", max(1, len(name)/3)
	for _, c := range candidates {
		if d := distance(strings.ToLower(name), strings.ToLower(c)); d <= most {
			best, most = c, d-1
		}
	}
	return best, best != ""
}

// distance is the optimal string alignment distance between a and b: how
// many insertions, deletions, substitutions and swaps of neighbouring
// letters turn one into the other.
func distance(a, b string) int {
	before, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], before[j-2]+1)
			}
		}
		before, prev, cur = prev, cur, before
	}
	return prev[len(b)]
}

// lenient is a section whose enumerated fields admit values beyond their
// lists: log.level admits what slog reads ("DEBUG", "info+2").
type lenient interface {
	admits(field, value string) bool
}

// allowed is an enumerated field's rule: the values its enum tag lists,
// and what else its lenient section admits.
type allowed struct {
	values []string
	also   func(string) bool
}

func (a *allowed) admits(s string) bool {
	return slices.Contains(a.values, s) || a.also != nil && a.also(s)
}

// enums reports every string beneath section v (at key) that its field's
// enum tag does not list.
func (p *problems) enums(v reflect.Value, key string) {
	l, _ := v.Interface().(lenient)
	for name, f := range keysOf(v.Type()) {
		var a *allowed
		if values := enum(f); values != nil {
			a = &allowed{values: values}
			if l != nil {
				a.also = func(s string) bool { return l.admits(f.Name, s) }
			}
		}
		p.enumsIn(v.FieldByIndex(f.Index), join(key, name), a)
	}
}

// enumsIn reports the strings in v (at key) that a refuses, and looks
// into the sections within it.
func (p *problems) enumsIn(v reflect.Value, key string, a *allowed) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			p.enumsIn(v.Elem(), key, a)
		}
	case reflect.Struct:
		p.enums(v, key)
	case reflect.Map:
		names := v.MapKeys()
		slices.SortFunc(names, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
		for _, k := range names {
			p.enumsIn(v.MapIndex(k), key+"."+k.String(), a)
		}
	case reflect.Slice:
		for i := range v.Len() {
			p.enumsIn(v.Index(i), fmt.Sprintf("%s[%d]", key, i), a)
		}
	case reflect.String:
		p.enumString(v.String(), key, a)
	}
}

// enumString reports s, the value of key, if a refuses it.
func (p *problems) enumString(s, key string, a *allowed) {
	if a != nil && !a.admits(s) {
		p.bad("%s: %q is not one of %s", key, s, enumText(a.values))
	}
}
