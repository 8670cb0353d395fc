// Package server is agentd's public AgentService: it runs generations,
// the tool loop of an agent whose tools come from MCP servers, and serves
// their records.
//
// A generation's life, file by file:
//
//   - generate.go: the Generate stream (start, resume, attach, detach) and
//     the generations that run without a client; preview.go and
//     generations.go are the unary calls; link.go is a generation's
//     connection to its client: the events going out (one sender owns the
//     stream's Send) and the answers coming in.
//   - validate.go checks a request up front and reports every problem at
//     once, by the rules of declarations (internal/mcpdecl) for its MCP
//     servers; plan.go is the result, a plan: which provider serves it,
//     where each MCP server runs (the provider, or agentd's bridge) and the
//     limits in effect.
//   - generation.go holds a generation's state and how it starts; run.go
//     drives it from its start, resume or adoption to its end.
//     session.go opens its bridge session, builds the tools the model is
//     offered and hands the session's requests on; modelturn.go streams one
//     model turn; toolturn.go runs one turn's tool calls (MCP tools through
//     the bridge, in parallel; function tools by asking the client; gated
//     ones after the client's approval, approval.go) and ends the turn;
//     end.go says how a run ended, and logs it.
//   - What a call waits for from the client is a wait (pause.go); when
//     nobody answers, the generation pauses, and a later resume
//     (resume.go), on any replica, continues it. What it waits for from a
//     person is a pending request of its record (pending.go), which
//     whoever may decide answers, on its stream or with DecideRequests
//     (decide.go), on any replica: the first decision recorded wins, and
//     the generation takes it (decided.go); pendinglist.go lists them. While a call runs, its MCP
//     server may make the generation ask its client (ask.go): for a
//     person's authorization of the server, agentd being its OAuth client
//     (authorization.go), for input (input.go), or to approve a sample of
//     the agent's model (sample.go).
//   - journal.go keeps the generation's durable record (internal/record);
//     adopt.go continues the generations of replicas that died or stopped.
//   - service.go is the Service that owns it all; metrics.go and spans.go
//     are the telemetry; admin.go the token admin.
//
// The files read in an order: no two refer to each other, but service.go
// and adopt.go (the Service's attached streams adopt what they follow).
// make lint keeps it so (tools/filerefs).
//
// The package never speaks MCP itself: everything MCP goes through the
// bridge (internal/bridgeclient), and everything durable through the
// record (internal/record). In its identifiers and comments, "server"
// means an MCP server; the gRPC server is the registrar a Service
// registers on, and a provider's HTTP endpoint is an endpoint.
package server
