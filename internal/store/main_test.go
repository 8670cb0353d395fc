package store_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/store/storetest"
)

func TestMain(m *testing.M) {
	storetest.Main() // a replica of the liveness tests, when started as one
	goleak.VerifyTestMain(m)
}
