package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentd/agentd/bridge/internal/mcpconn"
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/fault"
)

// session holds the connections of one generation.
type session struct {
	id      string
	log     *slog.Logger
	servers []*server
	byName  map[string]*server
	changes chan string // tools_changed events for the OpenSession stream

	done      chan struct{}
	closeOnce sync.Once
}

// server is one server of a session and its lazily made connection.
type server struct {
	target *target
	sess   *session

	mu   sync.Mutex // held while connecting, so a server connects once
	conn *mcpconn.Conn
}

func newSession(id, generationID string, targets []*target, log *slog.Logger) *session {
	sess := &session{
		id:      id,
		log:     log.With("session", id, "generation", generationID),
		byName:  make(map[string]*server, len(targets)),
		changes: make(chan string, 16),
		done:    make(chan struct{}),
	}
	for _, t := range targets {
		srv := &server{target: t, sess: sess}
		sess.servers = append(sess.servers, srv)
		sess.byName[t.name] = srv
	}
	return sess
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
			wg.Go(srv.close)
		}
		wg.Wait()
	})
}

// connection returns the server's connection, making it if needed.
func (srv *server) connection(ctx context.Context) (*mcpconn.Conn, error) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.sess.isClosed() {
		return nil, fault.New(fault.FailedPrecondition, "the bridge session is closed")
	}
	if srv.conn != nil {
		return srv.conn, nil
	}
	t := srv.target
	opts := mcpconn.Options{
		Logger: srv.sess.log,
		OnToolsChanged: func() {
			select {
			case srv.sess.changes <- t.name:
			default:
			}
		},
	}
	var conn *mcpconn.Conn
	var err error
	if t.stdio != nil {
		conn, err = mcpconn.DialStdio(ctx, *t.stdio, t.readTimeout, opts)
	} else {
		conn, err = mcpconn.DialHTTP(ctx, *t.http, t.readTimeout, opts)
	}
	if err != nil {
		return nil, err
	}
	srv.sess.log.Debug("mcp server connected", "server", t.name, "pid", conn.Pid())
	srv.conn = conn
	return conn, nil
}

// drop forgets conn after a failure that left it unusable (a timeout
// killed it, or it closed), so the next use starts afresh.
func (srv *server) drop(conn *mcpconn.Conn) {
	srv.mu.Lock()
	if srv.conn == conn {
		srv.conn = nil
	}
	srv.mu.Unlock()
	srv.closeConn(conn)
}

func (srv *server) close() {
	srv.mu.Lock()
	conn := srv.conn
	srv.conn = nil
	srv.mu.Unlock()
	if conn != nil {
		srv.closeConn(conn)
	}
}

func (srv *server) closeConn(conn *mcpconn.Conn) {
	if err := conn.Close(); err != nil {
		srv.sess.log.Warn("closing mcp server", "server", srv.target.name, "err", err)
	}
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

func (srv *server) listTools(ctx context.Context) (*bridgev1.ServerTools, error) {
	conn, err := srv.connection(ctx)
	if err != nil {
		return nil, err
	}
	tools, err := conn.ListTools(ctx)
	if err != nil {
		if broken(err) {
			srv.drop(conn)
		}
		return nil, err
	}
	out := &bridgev1.ServerTools{ServerName: srv.target.name}
	for _, t := range tools {
		if len(srv.target.allowedTools) > 0 && !slices.Contains(srv.target.allowedTools, t.Name) {
			continue
		}
		out.Tools = append(out.Tools, convertTool(t))
	}
	return out, nil
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

// callTool calls one tool. Bad arguments and the tool's own failures are
// results for the model; connection, timeout and protocol failures are
// errors.
func (s *session) callTool(ctx context.Context, serverName, tool, arguments string) (*bridgev1.CallToolResponse, error) {
	srv := s.byName[serverName]
	if srv == nil {
		return nil, fault.New(fault.NotFound, "no server %q in the bridge session", serverName)
	}
	args := map[string]any{}
	if arguments != "" {
		if err := json.Unmarshal([]byte(arguments), &args); err != nil || args == nil {
			return &bridgev1.CallToolResponse{Output: errorOutput("the arguments are not a JSON object"), IsError: true}, nil
		}
	}
	conn, err := srv.connection(ctx)
	if err != nil {
		return nil, err
	}
	res, err := conn.CallTool(ctx, tool, args)
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr):
		return flattenRPCError(rpcErr), nil
	case err != nil:
		if broken(err) {
			srv.drop(conn)
		}
		return nil, err
	}
	return flatten(res), nil
}
