// Package server is agentd's public AgentService. It owns the tool loop:
// it validates a request up front, decides where each MCP server runs,
// asks the bridge for the bridged servers' tools, streams the provider's
// turns, runs the model's tool calls (MCP tools through the bridge, in
// parallel; function tools by asking the client), asks the client to
// approve gated calls, and streams every event back.
//
// The server never speaks MCP itself: everything MCP goes through the
// Bridge interface, implemented over gRPC by NewBridgeClient.
package server

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/policy"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/providers"
)

// closeTimeout bounds closing a bridge session after a generation ends.
const closeTimeout = 30 * time.Second

// Options configures a Service.
type Options struct {
	// Logger receives one record per failed generation.
	Logger *slog.Logger
	// Providers are the provider adapters requests may name.
	Providers *providers.Registry
	// Bridge runs the bridged MCP servers.
	Bridge Bridge
	// Config holds the tool loop's defaults and limits.
	Config config.Generation
	// Rules are the bridge's rules for what a request may declare
	// (commands, env, private addresses), when agentd knows them: those of
	// its embedded bridge. Validation then refuses what they refuse up
	// front, with the request's other problems. Nil with a remote bridge,
	// whose configuration may differ: that bridge reports every refusal
	// itself, at once, when the session opens.
	Rules *policy.Rules
	// TracerProvider makes the spans of model turns and tool calls; nil
	// means none.
	TracerProvider trace.TracerProvider
	// Checkpoints stores paused generations; nil means generations cannot
	// pause (they fail when they would).
	Checkpoints store.Checkpoints
}

// Service implements agentd.v1.AgentService.
type Service struct {
	agentdv1.UnimplementedAgentServiceServer

	log         *slog.Logger
	providers   *providers.Registry
	bridge      Bridge
	cfg         config.Generation
	rules       *policy.Rules
	tracer      trace.Tracer
	checkpoints store.Checkpoints
}

// New returns a Service.
func New(opts Options) *Service {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &Service{
		log:         log,
		providers:   opts.Providers,
		bridge:      opts.Bridge,
		cfg:         opts.Config,
		rules:       opts.Rules,
		tracer:      tp.Tracer("github.com/agentd/agentd/server"),
		checkpoints: opts.Checkpoints,
	}
}

// Register registers the service on srv.
func (s *Service) Register(srv grpc.ServiceRegistrar) {
	agentdv1.RegisterAgentServiceServer(srv, s)
}

// Preview resolves a request without any I/O (R-P1): it never calls the
// bridge or the provider.
func (s *Service) Preview(_ context.Context, req *agentdv1.PreviewRequest) (*agentdv1.PreviewResponse, error) {
	p, err := s.newPlan("", req.GetAgent(), req.GetMessages(), nil)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return &agentdv1.PreviewResponse{
		Provider:        req.GetAgent().GetProvider(),
		Model:           req.GetAgent().GetModel(),
		Instructions:    req.GetAgent().GetInstructions(),
		Tools:           req.GetAgent().GetTools(),
		ProviderServers: p.placements(agentdv1.Placement_PLACEMENT_PROVIDER),
		Messages:        req.GetMessages(),
		ProviderOptions: req.GetAgent().GetProviderOptions(),
		MaxToolTurns:    int32(p.maxToolTurns),
	}, nil
}

// cloneWithName returns a copy of decl with its name set.
func cloneWithName(decl *agentdv1.MCPServer, name string) *agentdv1.MCPServer {
	c := proto.Clone(decl).(*agentdv1.MCPServer)
	c.Name = name
	return c
}
