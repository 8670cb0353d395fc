package pricing

import (
	"maps"
	"slices"
)

// Providers are the providers the table prices models of.
func (t *Table) Providers() []string {
	names := make(map[string]bool)
	for k := range t.prices {
		names[k.provider] = true
	}
	return slices.Sorted(maps.Keys(names))
}
