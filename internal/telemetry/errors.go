package telemetry

import (
	"log/slog"

	"go.opentelemetry.io/otel"
)

// LogErrors sends the errors OpenTelemetry reports of itself (an export
// that failed, a span limit reached, ...) to log, at warn, as
// "OpenTelemetry reported an error" with the error as err: by default
// they are printed as plain text on stderr, which breaks a JSON log.
// The handler is process-wide (otel.SetErrorHandler); the last call wins.
func LogErrors(log *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("OpenTelemetry reported an error", "err", err)
	}))
}
