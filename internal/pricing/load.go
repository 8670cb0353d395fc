package pricing

import (
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// shipped is the price table agentd ships with.
//
//go:embed prices.yaml
var shipped []byte

// shippedName names the shipped table in messages.
const shippedName = "internal/pricing/prices.yaml"

// Inline are price entries written within another YAML document, as a
// price file's models key holds them: agentd's configuration's
// pricing.models.
type Inline struct {
	// Models is the map of providers to their models' entries; nil for
	// none.
	Models *yaml.Node
	// File names the document in messages ("" for none); Key is where
	// Models stand in it ("pricing.models").
	File, Key string
}

// Check reports every problem of in's entries at once, each at its line.
func (in Inline) Check() error {
	_, err := in.entries()
	return err
}

func (in Inline) entries() (map[modelKey]*price, error) {
	p := newParser(in.File)
	if in.Models != nil {
		p.models(in.Models, in.Key)
	}
	return p.out, errors.Join(p.errs...)
}

// Load builds the price table: the shipped one, then the entries of the
// price file at file (none when file is ""), then inline's, each entry
// replacing the one of its provider and model or adding it. Every problem
// is reported at once, at its file and line.
func Load(file string, inline Inline) (*Table, error) {
	prices, err := parseFile(shippedName, shipped)
	if err != nil {
		return nil, err
	}
	var errs []error
	if file != "" {
		over, err := readFile(file)
		errs = append(errs, err)
		maps.Copy(prices, over)
	}
	over, err := inline.entries()
	maps.Copy(prices, over)
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, err
	}
	return &Table{prices: prices}, nil
}

// readFile reads the price file at path.
func readFile(path string) (map[modelKey]*price, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("price file: %w", err)
	}
	return parseFile(path, data)
}

// parseFile reads a price file's entries; name names it in messages.
func parseFile(name string, data []byte) (map[modelKey]*price, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, syntaxError(name, err)
	}
	p := newParser(name)
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty; a price file holds version, date and models", name)
	}
	p.document(doc.Content[0])
	return p.out, errors.Join(p.errs...)
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
