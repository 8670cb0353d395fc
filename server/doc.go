// Package server is agentd's public AgentService: it runs generations,
// the tool loop of an agent whose tools come from MCP servers, and serves
// their records.
//
// A generation's life, file by file:
//
//   - generate.go: the Generate stream (start, resume, attach, detach),
//     preview.go and generations.go the unary calls; link.go is a
//     generation's connection to its client: the events going out (one
//     sender owns the stream's Send) and the answers coming in.
//   - validate.go checks a request up front and reports every problem at
//     once; plan.go is the result, a plan: which provider serves it, where
//     each MCP server runs (the provider, or agentd's bridge) and the
//     limits in effect.
//   - generation.go holds a generation's state; run.go drives it from its
//     start, resume or adoption to its end: tools.go opens its bridge
//     session and builds the tools the model is offered, modelturn.go
//     streams one model turn, toolturn.go runs one turn's tool calls (MCP
//     tools through the bridge, in parallel; function tools by asking the
//     client), end.go says how a run ended and logs it.
//   - What a generation asks of its client: approval.go (may a gated call
//     run?), ask.go (the questions an MCP server's request raises while a
//     call runs), authorization.go (a person's authorization of an MCP
//     server, agentd being its OAuth client), input.go (an MCP server's
//     request for input), sample.go (an MCP server's request for a sample
//     of the agent's model). Unanswered, a generation pauses (pause.go) and
//     a later resume (resume.go), on any replica, continues it.
//   - journal.go keeps the generation's durable record (internal/record);
//     adopt.go continues the generations of replicas that died or stopped.
//   - metrics.go and spans.go are its telemetry; admin.go the token admin.
//
// The package never speaks MCP itself: everything MCP goes through the
// bridge (internal/bridgeclient), and everything durable through the
// record (internal/record). In its identifiers and comments, "server"
// means an MCP server; the gRPC server is the registrar a Service
// registers on, and a provider's HTTP endpoint is an endpoint.
package server
