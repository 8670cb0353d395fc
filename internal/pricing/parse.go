package pricing

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/text/currency"
)

// formatVersion is the version of the price file's format this agentd
// reads.
const formatVersion = "1"

// parser reads price entries from a YAML document's nodes, collecting
// every problem with its file and line.
type parser struct {
	file string
	out  map[modelKey]*price
	errs []error
}

func newParser(file string) *parser {
	return &parser{file: file, out: make(map[modelKey]*price)}
}

// bad records a problem of key, written at n.
func (p *parser) bad(n *yaml.Node, key, format string, args ...any) {
	at := fmt.Sprintf("line %d", n.Line)
	if p.file != "" {
		at = fmt.Sprintf("%s:%d", p.file, n.Line)
	}
	p.errs = append(p.errs, fmt.Errorf("%s: %s: %s", at, key, fmt.Sprintf(format, args...)))
}

// document reads a price file's top level: its format's version, its
// date and its models.
func (p *parser) document(root *yaml.Node) {
	seen := p.pairs(root, "the file", func(name string, k, v *yaml.Node) {
		switch name {
		case "version":
			if v.Kind != yaml.ScalarNode || v.Value != formatVersion {
				p.bad(v, name, "this agentd reads version %s of the format", formatVersion)
			}
		case "date":
			p.date(v, name)
		case "models":
			p.models(v, name)
		default:
			p.bad(k, name, "unknown key; a price file holds version, date and models")
		}
	})
	p.require(root, "the file", seen, "version", "date")
}

// models reads a map of providers to their models' entries, at key.
func (p *parser) models(n *yaml.Node, key string) {
	if isNull(n) {
		return
	}
	p.pairs(n, key, func(provider string, _, models *yaml.Node) {
		if isNull(models) {
			return
		}
		at := key + "." + provider
		p.pairs(models, at, func(model string, _, e *yaml.Node) {
			if pr := p.entry(e, at+"."+model); pr != nil {
				p.out[modelKey{provider, model}] = pr
			}
		})
	})
}

// rates are an entry's prices by key.
var rates = map[string]func(*price) *int64{
	"input":       func(e *price) *int64 { return &e.input },
	"output":      func(e *price) *int64 { return &e.output },
	"cache_read":  func(e *price) *int64 { return &e.cacheRead },
	"cache_write": func(e *price) *int64 { return &e.cacheWrite },
	"reasoning":   func(e *price) *int64 { return &e.reasoning },
}

// entry reads one model's entry, at key; nil if it is not a map.
func (p *parser) entry(n *yaml.Node, key string) *price {
	e := &price{input: none, output: none, cacheRead: none, cacheWrite: none, reasoning: none}
	seen := p.pairs(n, key, func(name string, k, v *yaml.Node) {
		at := key + "." + name
		switch rate, ok := rates[name]; {
		case name == "currency":
			e.currency = p.currency(v, at)
		case name == "date":
			e.date = p.date(v, at)
		case ok:
			*rate(e) = p.decimal(v, at)
		default:
			p.bad(k, at, "unknown key; an entry's keys are currency, date, input, output, cache_read, cache_write and reasoning")
		}
	})
	if seen == nil {
		return nil
	}
	p.require(n, key, seen, "currency", "date", "input", "output")
	if e.reasoning == none {
		e.reasoning = e.output
	}
	return e
}

// pairs calls each with every key of mapping n (at key) and its value,
// refusing a key written twice, and returns the keys seen; nil when n is
// not a map.
func (p *parser) pairs(n *yaml.Node, key string, each func(name string, k, v *yaml.Node)) map[string]bool {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.bad(n, key, "is not a map; write one \"key: value\" each")
		return nil
	}
	seen := make(map[string]bool)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		if seen[k.Value] {
			p.bad(k, key+"."+k.Value, "written twice")
			continue
		}
		seen[k.Value] = true
		each(k.Value, k, v)
	}
	return seen
}

// require refuses map n, at key, unless it wrote each of names.
func (p *parser) require(n *yaml.Node, key string, seen map[string]bool, names ...string) {
	var missing []string
	for _, name := range names {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	if seen != nil && len(missing) > 0 {
		p.bad(n, key, "needs %s", strings.Join(missing, ", "))
	}
}

// currency reads an ISO 4217 currency code, as written.
func (p *parser) currency(n *yaml.Node, key string) string {
	if n.Kind != yaml.ScalarNode || !ValidCurrency(n.Value) {
		p.bad(n, key, "%q is not an ISO 4217 currency code; write its three capital letters, e.g. USD or EUR", n.Value)
	}
	return n.Value
}

// date reads a day, YYYY-MM-DD, as written.
func (p *parser) date(n *yaml.Node, key string) string {
	if _, err := time.Parse(time.DateOnly, n.Value); n.Kind != yaml.ScalarNode || err != nil {
		p.bad(n, key, "%q is not a day; write YYYY-MM-DD, e.g. 2025-12-01", n.Value)
	}
	return n.Value
}

// decimal reads a price per million tokens as billionths of the unit; 0
// when it is not one.
func (p *parser) decimal(n *yaml.Node, key string) int64 {
	nanos, err := parseDecimal(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil {
		p.bad(n, key, "%q is not a price: %v", n.Value, err)
		return 0
	}
	return nanos
}

// maxUnits caps a price per million tokens: a unit of the currency a
// token is beyond any list, and keeps a turn's sum far from overflowing.
const maxUnits = 1_000_000

// parseDecimal reads a price per million tokens written exactly ("3",
// "0.075") as billionths of the unit.
func parseDecimal(s string) (int64, error) {
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("a price is not negative")
	}
	nanos, err := ParseAmount(s)
	if err == nil && nanos > maxUnits*1e9 {
		err = fmt.Errorf("more than %d of the unit per million tokens", maxUnits)
	}
	return nanos, err
}

// maxAmount bounds an amount so that its billionths fit an int64.
const maxAmount = math.MaxInt64 / 1_000_000_000

// ParseAmount reads an amount of a currency's unit written exactly ("25",
// "0.075") as billionths of it.
func ParseAmount(s string) (int64, error) {
	whole, frac, dotted := strings.Cut(s, ".")
	switch {
	case !digits(whole) || dotted && !digits(frac):
		return 0, fmt.Errorf("write a decimal of the currency's unit, e.g. 3 or 0.075")
	case len(frac) > 9:
		return 0, fmt.Errorf("finer than a billionth of the unit")
	}
	units, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || units >= maxAmount {
		return 0, fmt.Errorf("%d or more of the unit", int64(maxAmount))
	}
	billionths, _ := strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	return units*1e9 + billionths, nil
}

// ValidCurrency reports whether code is an ISO 4217 currency code as
// written: three capital letters of a known currency.
func ValidCurrency(code string) bool {
	u, err := currency.ParseISO(code)
	return err == nil && u.String() == code
}

// digits reports whether s is one or more decimal digits.
func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// deref is n, or what it aliases.
func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is null: a key written with nothing after it.
func isNull(n *yaml.Node) bool { return n.ShortTag() == "!!null" }
