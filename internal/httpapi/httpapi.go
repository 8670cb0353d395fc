// Package httpapi serves agentd's public services, agentd.v1.AgentService
// and agentd.v1.AdminService, to HTTP clients: over Connect, gRPC-Web and
// HTTP/JSON, whose routes are the google.api.http annotations of their
// protos; and the OpenAPI document of those routes. It writes no handler
// per route: connectrpc.com/vanguard, maintained by the Connect team,
// transcodes each request into a gRPC call to the grpc.Server that serves
// native gRPC. That server, its interceptors (authentication, tenants,
// roles, limits, audit lines, recovery) and its otelgrpc stats handler
// (traces, metrics) therefore serve every protocol alike, where a second
// server of connect-go handlers, or a gateway dialling gRPC, would need
// all of them again or a hop more.
//
// The handler also answers in JSON what the transcoder refuses before a
// call begins (an unknown route, a content type it does not read, a body
// over MaxBodyBytes), reads JSON strictly (an unknown field is an error
// naming it), answers CORS preflights for the configured origins, and
// hands native gRPC requests to the grpc.Server as they are. The event
// stream of a generation (Server-Sent Events) is the one route it serves
// itself, through the same grpc.Server, since the transcoder holds a
// REST response until its call ends (events.go).
package httpapi

import (
	"net/http"
	"strings"

	"connectrpc.com/vanguard"
	"google.golang.org/grpc"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/gen/openapi"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/console"
)

// MaxBodyBytes bounds the body of a request that is one message (HTTP/JSON
// and Connect's unary calls), and each message of a streaming one: gRPC's
// own bound on a message, which native gRPC calls meet.
const MaxBodyBytes = 4 << 20

// public are the services served over HTTP: the embedded bridge's admin
// API, health and reflection, which may share the gRPC server, stay gRPC
// alone.
var public = []string{agentdv1.AgentService_ServiceDesc.ServiceName, agentdv1.AdminService_ServiceDesc.ServiceName}

// Options configures New.
type Options struct {
	// CORS says which origins' scripts browsers may let call.
	CORS config.CORS
	// Console, when not nil, serves the web console at console.Path.
	Console http.Handler
}

// New returns the handler of srv's public services (those of them srv
// serves) over HTTP. Register them on srv first. Every gRPC request (a
// content type application/grpc, not gRPC-Web) goes to srv.ServeHTTP
// for whatever service it names, as it would on srv's own transport.
func New(srv *grpc.Server, o Options) (http.Handler, error) {
	var services []*vanguard.Service
	registered := srv.GetServiceInfo()
	for _, name := range public {
		if _, ok := registered[name]; ok {
			services = append(services, vanguard.NewService(name, srv))
		}
	}
	transcoder, err := vanguard.NewTranscoder(services,
		vanguard.WithCodec(newStrictJSON),
		vanguard.WithUnknownHandler(http.HandlerFunc(noRoute)),
		vanguard.WithDefaultServiceOptions(
			// Every protocol becomes gRPC, with protobuf's binary
			// encoding: what srv reads.
			vanguard.WithTargetProtocols(vanguard.ProtocolGRPC),
			vanguard.WithTargetCodecs(vanguard.CodecProto),
			vanguard.WithMaxMessageBufferBytes(MaxBodyBytes),
		),
	)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serveWithJSONErrors(transcoder, w, r) }))
	mux.Handle("GET /openapi.json", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { serveOpenAPI(w) }))
	if o.Console != nil {
		mux.Handle(console.Path, o.Console)
		mux.Handle(strings.TrimSuffix(console.Path, "/"), o.Console)
	}
	if _, ok := registered[agentdv1.AgentService_ServiceDesc.ServiceName]; ok {
		mux.Handle(eventsRoute, eventStream{srv})
	}
	web := withCORS(o.CORS, mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isGRPC(r.Header.Get("Content-Type")) {
			srv.ServeHTTP(w, r)
			return
		}
		web.ServeHTTP(w, r)
	}), nil
}

// isGRPC reports whether contentType is gRPC's (application/grpc, or
// application/grpc+codec), not gRPC-Web's.
func isGRPC(contentType string) bool {
	rest, ok := strings.CutPrefix(contentType, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// serveOpenAPI answers the OpenAPI document of the HTTP/JSON routes. It
// needs no credential: it describes the API, it is not an API call.
func serveOpenAPI(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapi.JSON)
}
