//go:build !stress

package faultsuite

// Without the stress tag each case runs once, at sizes that keep make test
// quick.
const (
	stress     = false
	hugeResult = 5 << 20 // over the 1 MiB default of bridge.max_result_bytes
)
