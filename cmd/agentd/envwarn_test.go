package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/logtest"
)

// `agentd serve` and `agentd bridge` start although an AGENTD_* variable
// is misspelt, and say so in a warning line naming the closest variable.
func TestStartWarnsOfMisspeltVariables(t *testing.T) {
	t.Setenv("AGENTD_LISTN", "127.0.0.1:1")
	path := filepath.Join(t.TempDir(), "agentd.yaml")
	if err := os.WriteFile(path, []byte("gc_heap_floor_mib: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logtest.Logs
	_, _, shutdown, err := setup(t.Context(), "bridge", []string{"--config", path}, &logs, true)
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	flush(shutdown)
	want := `level=WARN msg="AGENTD_LISTN is not a variable agentd reads; did you mean AGENTD_LISTEN?"`
	if !strings.Contains(logs.String(), want) {
		t.Errorf("the log does not say %s:\n%s", want, logs.String())
	}
}
