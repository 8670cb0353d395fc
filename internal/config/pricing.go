package config

import (
	"go.yaml.in/yaml/v3"

	"github.com/agentd/agentd/internal/pricing"
)

// Pricing changes the price table agentd prices model calls with. The
// table ships in agentd (docs/costs.md); entries from a file and entries
// written here replace the shipped ones or add to them, model by model.
type Pricing struct {
	// File is a price file, in the format of the shipped table, whose
	// entries replace or add to the shipped ones. Read at start: a
	// problem in it stops agentd, naming its line.
	File string `yaml:"file" env:"AGENTD_PRICING_FILE"`
	// Models are price entries written in the configuration, as a price
	// file's models key holds them (a map of providers to their models'
	// entries); they replace or add to those of the shipped table and of
	// pricing.file.
	Models PriceModels `yaml:"models" default:"none"`
}

// PriceModels are the price entries a configuration file writes, kept as
// written so that the price table's checks name their lines.
type PriceModels struct {
	// Node is their YAML; nil when the file writes none.
	Node *yaml.Node
}

// UnmarshalYAML keeps n as written.
func (m *PriceModels) UnmarshalYAML(n *yaml.Node) error {
	m.Node = n
	return nil
}

// Table builds the price table: the shipped one, then pricing.file's
// entries, then pricing.models'.
func (p Pricing) Table() (*pricing.Table, error) {
	return pricing.Load(p.File, p.inline(""))
}

// inline are pricing.models' entries, written in file.
func (p Pricing) inline(file string) pricing.Inline {
	return pricing.Inline{Models: p.Models.Node, File: file, Key: "pricing.models"}
}

// validate reports every problem of pricing.models' entries, at its line
// of the configuration file. Pricing.file is read at start.
func (p Pricing) validate(probs *problems) {
	file := ""
	if probs.src != nil {
		file = probs.src.file
	}
	if err := p.inline(file).Check(); err != nil {
		probs.errs = append(probs.errs, err)
	}
}
