package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/propagation"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentd/agentd/bridge/internal/mcpconn"
	"github.com/agentd/agentd/bridge/internal/pool"
	"github.com/agentd/agentd/bridge/internal/schemacache"
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/toolerror"
)

// session holds the connections of one generation.
type session struct {
	id       string
	log      *slog.Logger
	owner    mcpconn.Owner                 // its tenant, generation and trace, for metrics and stderr lines
	tel      *mcpconn.Telemetry            // the MCP requests' spans and durations
	prop     propagation.TextMapPropagator // carries calls' trace context to the servers
	cache    *schemacache.Cache
	useCache *bool // the session's override of the cache setting
	servers  []*mcpServer
	byName   map[string]*mcpServer
	changes  chan string                  // tools_changed events for the OpenSession stream
	asks     chan *bridgev1.ServerRequest // server requests for the OpenSession stream

	askMu   sync.Mutex
	lastAsk uint64
	waiting map[uint64]chan *bridgev1.AnswerServerRequestRequest // by ServerRequest.id
	// maxResult caps a tool result's bytes (config.Bridge.MaxResultBytes).
	maxResult int

	done      chan struct{}
	closeOnce sync.Once
	closing   sync.WaitGroup // closes of broken connections
}

// mcpServer is one MCP server of a session and its lazily made
// connection: a process leased from the server's pool, or an HTTP session.
type mcpServer struct {
	target *target
	sess   *session
	pools  *pools
	entry  *poolEntry // stdio servers: the pool the session attached to
	// owner is the session as its connection serves it: the session's
	// owner, whose server requests name this server.
	owner mcpconn.Owner

	mu    sync.Mutex // held while connecting, so a server connects once
	conn  *mcpconn.Conn
	lease *pool.Lease[*mcpconn.Conn]
}

// newSession makes a session of the OpenSession call of ctx, whose trace
// is the session's.
func (s *Service) newSession(ctx context.Context, id string, req *bridgev1.OpenSessionRequest, targets []*target) *session {
	owner := mcpconn.Owner{Tenant: req.GetTenant(), Generation: req.GetGenerationId()}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		owner.TraceID = sc.TraceID().String()
	}
	sess := &session{
		id:        id,
		log:       s.log.With("session", id, "generation", req.GetGenerationId()),
		owner:     owner,
		tel:       s.telemetry,
		prop:      s.propagator,
		cache:     s.cache,
		useCache:  req.Cache,
		byName:    make(map[string]*mcpServer, len(targets)),
		changes:   make(chan string, 16),
		asks:      make(chan *bridgev1.ServerRequest),
		waiting:   make(map[uint64]chan *bridgev1.AnswerServerRequestRequest),
		done:      make(chan struct{}),
		maxResult: s.cfg.MaxResultBytes,
	}
	for _, t := range targets {
		srv := &mcpServer{target: t, sess: sess, pools: s.pools, owner: owner}
		srv.owner.Elicit = func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			return sess.elicit(ctx, t.name, p)
		}
		//lint:ignore SA1019 sampling is deprecated from MCP 2026-07-28 (SEP-2577); servers still sample
		srv.owner.Sample = func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return sess.sample(ctx, t.name, p)
		}
		if t.stdio != nil {
			srv.entry = s.pools.attach(req.GetTenant(), t.ref, *t.stdio)
		}
		sess.servers = append(sess.servers, srv)
		sess.byName[t.name] = srv
	}
	return sess
}

// resumable reports whether the session holds nothing of its own: each
// of its servers is a stdio server whose one process the sessions of its
// pool share, so another session opened with the same request serves its
// generation as this one would (SessionOpened.resumable).
func (s *session) resumable() bool {
	for _, srv := range s.servers {
		if srv.entry == nil || !srv.entry.shared {
			return false
		}
	}
	return true
}

func (s *session) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// close closes every connection of the session, in parallel, and waits for
// their processes to stop. Idempotent. Failures are logged, never returned:
// a teardown problem must not replace the generation's own outcome.
func (s *session) close() {
	s.closeOnce.Do(func() {
		close(s.done)
		var wg sync.WaitGroup
		for _, srv := range s.servers {
			wg.Go(func() {
				srv.close()
				if srv.entry != nil {
					srv.pools.detach(srv.entry)
				}
			})
		}
		wg.Wait()
		s.closing.Wait()
	})
}

// toolsChanged drops the server's cached tool list and tells the session's
// caller.
func (srv *mcpServer) toolsChanged() {
	srv.sess.cache.Invalidate(srv.target.key)
	select {
	case srv.sess.changes <- srv.target.name:
	default:
	}
}

// connection returns the server's connection, making it if needed (or
// if its process has exited): a stdio server's process comes from its pool
// (a warm spare when there is one), an HTTP server is dialled.
func (srv *mcpServer) connection(ctx context.Context) (*mcpconn.Conn, error) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.sess.isClosed() {
		return nil, fault.New(fault.FailedPrecondition, "the bridge session is closed")
	}
	if srv.conn != nil {
		select {
		case <-srv.conn.Exited():
			// The process died between calls (another session's call
			// crashed a shared one, say): this call goes to a fresh one.
			srv.disconnect(true)
		default:
			return srv.conn, nil
		}
	}
	t := srv.target
	if t.stdio != nil {
		lease, err := srv.entry.pool.Acquire(ctx, t.readTimeout)
		if err != nil {
			return nil, err
		}
		srv.lease = lease
		srv.conn = lease.Conn().View(t.name, t.readTimeout, srv.owner)
		if !srv.entry.shared {
			srv.conn.Serve(&srv.owner) // its stderr and its questions are this session's until given back
		}
	} else {
		spec := *t.http
		if t.oauth {
			spec.Authorize = func(ctx context.Context, ch mcpconn.Challenge) (string, error) {
				return srv.sess.authorize(ctx, t.name, ch)
			}
		}
		conn, err := mcpconn.DialHTTP(ctx, spec, t.readTimeout, mcpconn.Options{
			Logger: srv.sess.log, Propagator: srv.sess.prop, Telemetry: srv.sess.tel, Tenant: srv.sess.owner.Tenant,
			Versions: versionMemory{srv.sess.cache, t.serverKey},
		})
		if err != nil {
			return nil, err
		}
		srv.conn = conn
		conn.Serve(&srv.owner) // dialled for this session alone: its log messages and questions are the session's
	}
	srv.conn.OnToolsChanged(srv.toolsChanged)
	srv.sess.log.Debug("mcp server connected", "server", t.name, "pid", srv.conn.Pid())
	return srv.conn, nil
}

// drop forgets conn after a failure that left it unusable (a timeout
// killed it, it crashed, the server went away), so the next use starts
// afresh.
func (srv *mcpServer) drop(conn *mcpconn.Conn) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.conn == conn {
		srv.disconnect(true)
	}
}

func (srv *mcpServer) close() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.disconnect(false)
}

// disconnect gives the connection back: a leased process to its pool, an
// HTTP session closed. srv.mu is held.
func (srv *mcpServer) disconnect(broken bool) {
	conn := srv.conn
	if conn == nil {
		return
	}
	conn.OnToolsChanged(nil)
	srv.conn = nil
	if srv.lease != nil {
		if !srv.entry.shared {
			conn.Serve(nil)
		}
		srv.lease.Release(broken)
		srv.lease = nil
		return
	}
	closeConn := func() {
		if err := conn.Close(); err != nil {
			srv.sess.log.Warn("closing mcp server", "server", srv.target.name, "err", err)
		}
	}
	if broken {
		// Closing a broken HTTP session may wait for the server (DELETE);
		// the failure it follows should not. The session's close waits.
		srv.sess.closing.Go(closeConn)
		return
	}
	closeConn()
}

// broken reports whether err leaves the connection unusable.
func broken(err error) bool {
	k := fault.KindOf(err)
	return k == fault.Timeout || k == fault.Unavailable
}

// listTools lists the named servers' tools (all when names is empty), in
// session order, all servers at once. Any failure fails the whole list.
func (s *session) listTools(ctx context.Context, names []string) ([]*bridgev1.ServerTools, error) {
	servers := s.servers
	if len(names) > 0 {
		servers = nil
		for _, srv := range s.servers {
			if slices.Contains(names, srv.target.name) {
				servers = append(servers, srv)
			}
		}
		if len(servers) != len(names) {
			return nil, fault.New(fault.NotFound, "ListTools names a server that is not in the session")
		}
	}
	// Fail fast: the first failure cancels the other listings.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	out := make([]*bridgev1.ServerTools, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		wg.Go(func() {
			var err error
			if out[i], err = srv.listTools(ctx); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// cachedTools is what listTools would answer now if the schema cache holds
// every server's tool list, each a hit; false, counting nothing, if it does
// not (a server agentd authorizes per end user, whose list is never
// cached, or one not cached now).
// It connects to no server. A list whose revision is known[i] (the
// request's known_revisions) comes back unchanged, without its tools.
func (s *session) cachedTools(known []uint64) ([]*bridgev1.ServerTools, bool) {
	keys := make([]schemacache.Key, len(s.servers))
	for i, srv := range s.servers {
		if use := srv.cacheUse(); use != nil && !*use {
			return nil, false
		}
		keys[i] = srv.target.key
	}
	lists, ok := s.cache.Cached(keys, s.useCache, known)
	if !ok {
		return nil, false
	}
	out := make([]*bridgev1.ServerTools, len(lists))
	for i, l := range lists {
		out[i] = &bridgev1.ServerTools{ServerName: s.servers[i].target.name, Tools: l.Tools, CacheHit: true, Revision: l.Revision, Unchanged: l.Known}
	}
	return out, true
}

// cacheUse is the cache setting of the server's tool list: the session's
// override (nil: the cache's own setting), or off for a server agentd
// authorizes per end user, which may list different tools to each while
// the bridge does not know whose token it holds: its list is never
// cached.
func (srv *mcpServer) cacheUse() *bool {
	if srv.target.oauth {
		return new(bool)
	}
	return srv.sess.useCache
}

// listTools lists the server's tools, from the cache when it can: a hit
// connects to nothing.
func (srv *mcpServer) listTools(ctx context.Context) (*bridgev1.ServerTools, error) {
	tools, hit, revision, err := srv.sess.cache.FetchRevision(ctx, srv.target.key, srv.target.name, srv.cacheUse(), srv.fetchTools)
	if err != nil {
		return nil, err
	}
	return &bridgev1.ServerTools{ServerName: srv.target.name, Tools: tools, CacheHit: hit, Revision: revision}, nil
}

// fetchTools asks the server for its tools and keeps the allowed ones,
// with how long the server lets them be cached (a 2026-07-28 server's
// ttlMs; nil: no hint).
func (srv *mcpServer) fetchTools(ctx context.Context) ([]*bridgev1.Tool, *time.Duration, error) {
	conn, err := srv.connection(ctx)
	if err != nil {
		return nil, nil, err
	}
	tools, ttl, err := conn.ListToolsTTL(ctx)
	if err != nil {
		if broken(err) {
			srv.drop(conn)
		}
		return nil, nil, err
	}
	var out []*bridgev1.Tool
	for _, t := range tools {
		if len(srv.target.allowedTools) > 0 && !slices.Contains(srv.target.allowedTools, t.Name) {
			continue
		}
		out = append(out, convertTool(t))
	}
	return out, ttl, nil
}

// convertTool turns an MCP tool into the bridge's form; a missing or
// unusable input schema becomes an empty object schema.
func convertTool(t *mcp.Tool) *bridgev1.Tool {
	out := &bridgev1.Tool{Name: t.Name, Description: t.Description}
	var schema map[string]any
	if t.InputSchema != nil {
		if data, err := json.Marshal(t.InputSchema); err == nil {
			_ = json.Unmarshal(data, &schema)
		}
	}
	if schema == nil {
		schema = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	if s, err := structpb.NewStruct(schema); err == nil {
		out.InputSchema = s
	} else {
		out.InputSchema, _ = structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{}})
	}
	if a := t.Annotations; a != nil {
		out.Annotations = &bridgev1.ToolAnnotations{
			Title:           a.Title,
			ReadOnlyHint:    a.ReadOnlyHint,
			DestructiveHint: a.DestructiveHint == nil || *a.DestructiveHint, // MCP default: true
			IdempotentHint:  a.IdempotentHint,
			OpenWorldHint:   a.OpenWorldHint == nil || *a.OpenWorldHint, // MCP default: true
		}
	}
	return out
}

// callTool calls one tool. Bad arguments, the tool's own failures and a
// stdio server that stops during the call (it crashed or was killed;
// the model is told, and the server's next call starts a fresh process)
// are results for the model; connection, timeout and protocol failures are
// errors, and so is a call that the session's close cut short.
//
// The call's span, tools/call {tool} of kind CLIENT, is mcpconn's: it
// covers the request itself, and its trace context is the one the server
// gets in params._meta.
func (s *session) callTool(ctx context.Context, serverName, tool, arguments string) (*bridgev1.CallToolResponse, error) {
	srv := s.byName[serverName]
	if srv == nil {
		return nil, fault.New(fault.NotFound, "no server %q in the bridge session", serverName)
	}
	args := json.RawMessage(arguments)
	if !jsonObject(args) {
		return &bridgev1.CallToolResponse{Output: toolerror.JSON("the arguments are not a JSON object"), IsError: true}, nil
	}
	conn, err := srv.connection(ctx)
	if err != nil {
		return nil, err
	}
	res, err := conn.CallTool(ctx, tool, args)
	var rpcErr *jsonrpc.Error
	var pending *mcpconn.InputRequired
	switch {
	case errors.As(err, &pending):
		// agentd deferred an input request: the call ends, to be
		// retried with the answers.
		return inputRequired(serverName, pending)
	case errors.As(err, &rpcErr):
		return flattenRPCError(rpcErr), nil
	case err != nil:
		if broken(err) {
			srv.drop(conn)
		}
		if !errors.Is(err, mcpconn.ErrStopped) {
			return nil, err
		}
		if s.isClosed() {
			return nil, errSessionClosed // the close stopped the server
		}
		s.log.Warn("mcp server stopped during a tool call; the model is told", "server", serverName, "tool", tool, "err", err)
		return stoppedResult(serverName), nil
	}
	return capResult(flatten(res), tool, s.maxResult), nil
}

// stoppedResult is what the model sees of a call whose stdio server stopped
// before it answered.
func stoppedResult(serverName string) *bridgev1.CallToolResponse {
	return &bridgev1.CallToolResponse{IsError: true, Output: toolerror.JSON(fmt.Sprintf(
		"the MCP server %q stopped during the call; it may or may not have run", serverName))}
}

// jsonObject reports whether data is empty (no arguments) or one valid JSON
// object, which goes to the server as it is.
func jsonObject(data []byte) bool {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return true
	}
	return trimmed[0] == '{' && json.Valid(trimmed)
}
