//go:build stress

package faultsuite

// With the stress tag (make stress) the cases run at full size.
const (
	stress     = true
	hugeResult = 50 << 20
)
