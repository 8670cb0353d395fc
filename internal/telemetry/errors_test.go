package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.opentelemetry.io/otel"
)

// X-O4: an error OpenTelemetry reports of itself (otel.Handle, as a failed
// export does) is a line of the JSON log, not plain text beside it.
// Not parallel: the error handler is process-wide.
func TestLogErrors(t *testing.T) {
	var buf bytes.Buffer
	LogErrors(NewLogger(&buf, slog.LevelInfo, "json"))
	t.Cleanup(func() { LogErrors(slog.New(slog.DiscardHandler)) })
	otel.Handle(errors.New("traces export: connection refused"))

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("log = %q; want one line", buf.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatalf("not a JSON line: %q: %v", lines[0], err)
	}
	want := map[string]any{"level": "WARN", "msg": "OpenTelemetry reported an error", "err": "traces export: connection refused"}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreMapEntries(func(k string, _ any) bool { return k == "time" })); diff != "" {
		t.Errorf("line (-want +got):\n%s", diff)
	}
}
