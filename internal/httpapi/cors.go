package httpapi

import (
	"net/http"
	"slices"

	connectcors "connectrpc.com/cors"
	"github.com/rs/cors"

	"github.com/agentd/agentd/internal/config"
)

// corsMaxAge is how long, in seconds, a browser may keep a preflight's
// answer: Chromium's own cap.
const corsMaxAge = 7200

// withCORS answers the CORS preflights of c's origins and adds CORS
// headers to their requests' answers; without origins it is h, and
// browsers allow no cross-origin call. The headers are Connect's and
// gRPC-Web's (connectrpc.com/cors) and those agentd reads or writes
// besides: authorization, trace context, an SSE stream's Last-Event-ID,
// and Retry-After. Credentials are never allowed: a script sends its own
// authorization.
func withCORS(c config.CORS, h http.Handler) http.Handler {
	if len(c.AllowedOrigins) == 0 {
		return h
	}
	return cors.New(cors.Options{
		AllowedOrigins:   c.AllowedOrigins,
		AllowedMethods:   connectcors.AllowedMethods(),
		AllowedHeaders:   slices.Concat(connectcors.AllowedHeaders(), []string{"Authorization", "Traceparent", "Tracestate", "Last-Event-ID"}),
		ExposedHeaders:   slices.Concat(connectcors.ExposedHeaders(), []string{"Retry-After"}),
		MaxAge:           corsMaxAge,
		AllowCredentials: false,
	}).Handler(h)
}
