package server

import (
	"fmt"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"sync"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

// newSessionLife returns the life of a session that g, running in ctx,
// is about to open.
func (g *generation) newSessionLife(ctx context.Context) *sessionLife {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	asked, stop := context.WithCancel(context.Background())
	return &sessionLife{s: g.s, g: g, ctx: sctx, cancel: cancel, detach: context.AfterFunc(ctx, cancel), asked: asked, stop: stop}
}

// sessionLife is a generation's bridge session as the generation holds it:
// the context the session lives in, and the gate its servers' requests
// pass on their way to the generation. A nil sessionLife is that of a run
// that opened no session.
//
// Stopping a session's processes takes time that is the servers', not the
// generation's: a stdio server gets terminate_grace to exit after its
// stdin closes, and some take hundreds of milliseconds (server-everything
// waits out a 350 ms timer). So a generation does not wait for it: once
// the generation is over, its session is closed on a goroutine the
// Service owns, while the generation's stream ends. The processes stay
// counted in their pools until they have stopped, and the Service's Close
// waits for every such close, so that none outlives agentd's shutdown.
type sessionLife struct {
	s    *Service
	sess bridgeclient.Session // nil until it opened, or if it did not
	// ctx is the session's lifetime: the generation's while it runs (a
	// cancelled generation's session is cut at once), then its own until
	// its close is done, so that the close ends the session's streams with
	// OK rather than as cancelled.
	ctx    context.Context
	cancel context.CancelFunc
	detach func() bool // stops the generation's end from reaching ctx

	// The servers' requests reach the generation only
	// while it runs: its end cancels those under way (asking) and refuses
	// later ones, which find its stream already closed.
	g      *generation
	mu     sync.Mutex
	over   bool
	asking sync.WaitGroup
	stop   context.CancelFunc // ends the requests under way
	asked  context.Context
}

// Answer hands r to the generation while it runs.
func (l *sessionLife) Answer(ctx context.Context, r *bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest {
	l.mu.Lock()
	if l.over {
		l.mu.Unlock()
		return bridgeclient.Refusal(fault.New(fault.Canceled, "the generation is over"))
	}
	l.asking.Add(1)
	l.mu.Unlock()
	defer l.asking.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.asked, cancel)()
	return l.g.Answer(ctx, r)
}

// end is called once the generation is over. It returns once no server
// request touches the generation any more.
func (l *sessionLife) end() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.over = true
	l.mu.Unlock()
	l.stop()
	l.asking.Wait()
	l.detach()
}

// close closes the session, after end, and then calls then: on a
// goroutine the Service owns, which the caller does not wait for, unless
// the Service is closing or no session opened.
func (l *sessionLife) close(then func()) {
	if l == nil {
		then()
		return
	}
	closeSession := func() {
		if l.sess != nil {
			l.sess.Close(l.ctx)
		}
		l.cancel()
		then()
	}
	if l.sess == nil || !l.s.goBackground(closeSession) {
		closeSession()
	}
}

// openRequest describes the bridged servers to the bridge.
func (g *generation) openRequest(ctx context.Context, bridged []*serverPlan) *bridgev1.OpenSessionRequest {
	// The tools come with the session when the cache has them all: the
	// ListTools call that follows the open is answered without a call.
	req := &bridgev1.OpenSessionRequest{GenerationId: g.id, Tenant: g.tenant, ListCachedTools: true}
	if g.plan.agent.McpCache != nil {
		req.Cache = g.plan.agent.McpCache
	}
	for _, sp := range bridged {
		d := sp.decl
		spec := &bridgev1.ServerSpec{Name: sp.name, ReadTimeout: durationpb.New(sp.readTimeout), AllowedTools: d.GetAllowedTools()}
		switch t := d.GetTransport().(type) {
		case *agentdv1.MCPServer_Url:
			h := &bridgev1.HTTPTarget{
				Url: t.Url, Authorization: d.GetAuthorization(), Headers: d.GetHeaders(), MaxReconnectionWait: d.GetMaxReconnectionWait(),
			}
			if d.GetOauth() != nil {
				// The token agentd keeps for the end user goes with the
				// first request; a refusal comes back to agentd.
				h.Oauth, h.Authorization = true, g.storedAuthorization(ctx, sp)
			}
			spec.Transport = &bridgev1.ServerSpec_Http{Http: h}
		case *agentdv1.MCPServer_Command:
			spec.Transport = &bridgev1.ServerSpec_Stdio{Stdio: &bridgev1.StdioTarget{
				Command: t.Command, Args: d.GetArgs(), Env: d.GetEnv(), UnsetEnv: d.GetUnsetEnv(),
			}}
		case *agentdv1.MCPServer_Ref:
			spec.Transport = &bridgev1.ServerSpec_Ref{Ref: t.Ref}
		}
		req.Servers = append(req.Servers, spec)
	}
	// The lists agentd has made already need not come again (toolLists).
	req.KnownRevisions = g.s.toolLists.known(g.tenant, req.GetServers())
	return req
}

// serverList is a bridged server's tools, as offered to the model.
type serverList struct {
	server string
	tools  offeredList
}

// listTools lists the session's tools, each server's list made for the
// model once per revision (toolLists): a list the session brought as
// unchanged is the one made before, unless that has been forgotten since,
// when the session lists them all again.
func (g *generation) listTools(ctx context.Context, sess bridgeclient.Session) ([]serverList, error) {
	for range 2 {
		listed, err := sess.ListTools(ctx)
		if err != nil {
			return nil, err
		}
		lists, ok := g.s.toolLists.offered(g.tenant, listed)
		if !ok {
			continue // ListTools, called again, lists every tool
		}
		out := make([]serverList, len(listed))
		for i, st := range listed {
			out[i] = serverList{server: st.GetServerName(), tools: lists[i]}
		}
		return out, nil
	}
	return nil, fault.New(fault.Internal, "the bridge listed a server's tools as unchanged in answer to ListTools")
}

// offerTools builds the tool list the model sees: the agent's tools, then
// each bridged server's, in declaration order. Clashing names are refused,
// naming the tool and both owners, unless the agent asked for prefixing.
func (g *generation) offerTools(serverTools []serverList) error {
	agent := g.plan.agent
	// Each schema is encoded once, for every turn of the generation
	// (providers.Request.ToolParameters); a server's, once per revision
	// of its list (toolLists).
	for _, t := range agent.GetTools() {
		g.tools = append(g.tools, t)
		g.owners[t.GetName()] = &toolOwner{origin: agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION}
		g.infos = append(g.infos, &agentdv1.ToolInfo{Name: t.GetName(), Origin: agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION})
		params := providers.ToolParametersJSON(t)
		g.toolParams = append(g.toolParams, params)
		g.countSchema(t.GetName(), t.GetDescription(), params, t.GetParameters() == nil)
	}
	byName := make(map[string]*serverPlan)
	for _, sp := range g.plan.bridged() {
		byName[sp.name] = sp
	}
	prefix := agent.GetToolNameConflict() == agentdv1.ToolNameConflict_TOOL_NAME_CONFLICT_PREFIX
	var v violations
	for _, st := range serverTools {
		sp := byName[st.server]
		if sp == nil {
			return fault.New(fault.Internal, "the bridge listed tools of an unknown server")
		}
		for _, t := range st.tools {
			if t.invalid != "" {
				g.omitted = append(g.omitted, omittedTool(sp.name, t))
				continue
			}
			name := t.name
			if prefix {
				name = prefixedName(sp.name, name)
			}
			if prev, clash := g.owners[name]; clash {
				if prev.origin == agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION {
					v.add(sp.field, "a tool named %q is declared by the agent and also offered by the MCP server %q, so the model cannot choose between them; rename one, or restrict the server with allowed_tools",
						name, sp.name)
				} else {
					v.add(sp.field, "two declared MCP servers offer a tool named %q: %q and %q; the model cannot choose between them, so rename one, restrict one with allowed_tools, or set tool_name_conflict to PREFIX",
						name, prev.server.name, sp.name)
				}
				continue
			}
			g.owners[name] = &toolOwner{origin: agentdv1.ToolOrigin_TOOL_ORIGIN_MCP, server: sp, serverTool: t.name}
			// The schema is offered encoded alone: the adapters read
			// ToolParameters, and the generation holds no decoded copy of
			// the bridge's list while it waits.
			g.tools = append(g.tools, &agentdv1.FunctionTool{Name: name, Description: t.description})
			g.toolParams = append(g.toolParams, t.params)
			g.countSchema(name, t.description, t.params, t.absent)
			g.infos = append(g.infos, &agentdv1.ToolInfo{Name: name, Origin: agentdv1.ToolOrigin_TOOL_ORIGIN_MCP, ServerName: sp.name, ServerToolName: t.name})
		}
	}
	if len(v) > 0 {
		return fault.InvalidRequest(v)
	}
	return nil
}

// omittedTool is the warning that a server's tool t is left out of the
// generation: its schema is not a JSON Schema, which the model must be
// sent. The rest of the generation goes on without it.
func omittedTool(server string, t offeredTool) *agentdv1.Warning {
	return &agentdv1.Warning{
		Code: "TOOL_SCHEMA_INVALID", ServerName: server, ToolName: t.name,
		Message: fmt.Sprintf("the MCP server %q lists the tool %q with an input schema that is not a JSON Schema (%s); the tool is not offered to the model", server, t.name, t.invalid),
	}
}

// countSchema adds an offered tool to the generation's schema bytes
// (Usage.tool_schema_bytes): its name, description and encoded parameters,
// an absent schema counting as "{}", as it always did.
func (g *generation) countSchema(name, description string, params json.RawMessage, absent bool) {
	size := len(params)
	if absent {
		size = len("{}")
	}
	g.schemaBytes += int64(len(name) + len(description) + size)
}

// toolNameMaxLen is the longest tool name every provider accepts.
const toolNameMaxLen = 64

var unsafeNameChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// prefixedName is "<server>__<tool>", made of characters every provider
// accepts, and kept within 64 characters by a stable hash of the whole.
func prefixedName(server, tool string) string {
	full := unsafeNameChars.ReplaceAllString(server, "_") + "__" + unsafeNameChars.ReplaceAllString(tool, "_")
	if len(full) <= toolNameMaxLen {
		return full
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	return full[:toolNameMaxLen-9] + "_" + hex.EncodeToString(sum[:4])
}

// Answer answers what the generation's bridged servers ask of agentd
// (bridgeclient.Answerer).
func (g *generation) Answer(ctx context.Context, r *bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest {
	switch k := r.GetKind().(type) {
	case *bridgev1.ServerRequest_Authorization:
		v, err := g.authorize(ctx, r.GetServerName(), k.Authorization)
		if err != nil {
			return bridgeclient.Refusal(err)
		}
		return &bridgev1.AnswerServerRequestRequest{Answer: &bridgev1.AnswerServerRequestRequest_Authorization{Authorization: v}}
	case *bridgev1.ServerRequest_Elicitation:
		return g.elicitAnswer(ctx, r)
	case *bridgev1.ServerRequest_Sampling:
		return g.sampleAnswer(ctx, r)
	}
	return nil
}
