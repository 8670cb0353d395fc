package record

import (
	"testing"

	"go.uber.org/goleak"
)

// The record's keepers, claims and sweeper own goroutines: none outlives
// its owner.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
