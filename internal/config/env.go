package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// envSettings are the settings an AGENTD_* variable sets, in declaration
// order.
var envSettings = sync.OnceValue(func() []setting {
	var out []setting
	walkSettings(reflect.TypeFor[Config](), scope{index: []int{}}, func(s setting) {
		if s.env != "" {
			out = append(out, s)
		}
	})
	return out
})

// applyEnv sets every setting whose variable getenv gives a value (an
// empty one leaves it), parsed as its type, and records the variable as
// the setting's source. It reports every value that does not parse.
func (c *Config) applyEnv(getenv func(string) string, src *sources) []error {
	var errs []error
	root := reflect.ValueOf(c).Elem()
	for _, s := range envSettings() {
		text := getenv(s.env)
		if text == "" {
			continue
		}
		if err := setText(root.FieldByIndex(s.index), text); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", s.env, s.key, err))
			continue
		}
		src.env[s.key] = s.env
	}
	return errs
}

// textParsers parse a variable's text by the kind of its setting: a list
// is comma-separated (blanks dropped), a boolean is what
// strconv.ParseBool reads (1, t, true, 0, f, false, ...).
var textParsers = map[reflect.Kind]func(string) (any, error){
	reflect.String: func(s string) (any, error) { return s, nil },
	reflect.Bool:   func(s string) (any, error) { return strconv.ParseBool(s) },
	reflect.Int:    func(s string) (any, error) { return strconv.Atoi(s) },
	reflect.Slice:  func(s string) (any, error) { return splitList(s), nil },
}

// setText sets v from a variable's text; a duration is what
// time.ParseDuration reads.
func setText(v reflect.Value, text string) error {
	parse := textParsers[v.Kind()]
	if v.Type() == durationType {
		parse = func(s string) (any, error) { return time.ParseDuration(s) }
	}
	x, err := parse(text)
	if err != nil {
		return notA(strconv.Quote(text), v.Type(), text)
	}
	v.Set(reflect.ValueOf(x).Convert(v.Type()))
	return nil
}

// splitList splits a comma-separated environment value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// Variables that agentd reads besides the configuration's: AGENTD_CONFIG
// (the file), the defaults of the client commands' flags (the examples
// read the token and TLS ones too), the address the conformance shim
// dials, and the test harnesses', by their prefixes.
var (
	otherVariables = []string{"AGENTD_CONFIG", "AGENTD_ADDR", "AGENTD_TOKEN", "AGENTD_TLS_CA", "AGENTD_TLS_CERT", "AGENTD_TLS_KEY", "AGENTD_CONFORMANCE_ADDR"}
	otherPrefixes  = []string{"AGENTD_TEST_", "AGENTD_REQUIRE_", "AGENTD_MCPTEST_"}
)

// EnvWarnings returns a warning for every AGENTD_* variable of environ
// (as os.Environ gives it) that agentd does not read: a misspelt name
// would otherwise be ignored without a word. Each names the closest
// variable agentd reads, when one is close.
func EnvWarnings(environ []string) []string {
	known := knownVariables()
	var warnings []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, "AGENTD_")
		if !ok || slices.Contains(known, rest) || readByTests(name) {
			continue
		}
		w := name + " is not a variable agentd reads"
		if near, ok := closest(rest, known); ok {
			w += "; did you mean AGENTD_" + near + "?"
		}
		warnings = append(warnings, w)
	}
	return warnings
}

// readByTests reports whether name is one of the test harnesses'
// variables.
func readByTests(name string) bool {
	return slices.ContainsFunc(otherPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// knownVariables are the names of the variables agentd reads, without
// their common prefix AGENTD_, which would make any two look close.
func knownVariables() []string {
	var known []string
	for _, name := range otherVariables {
		known = append(known, strings.TrimPrefix(name, "AGENTD_"))
	}
	for _, s := range envSettings() {
		known = append(known, strings.TrimPrefix(s.env, "AGENTD_"))
	}
	return known
}
