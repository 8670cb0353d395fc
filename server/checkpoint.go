package server

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// A running generation's checkpoint (X-G3) is a statev1.Checkpoint like a
// paused one, with the agent it runs: the conversation so far, the usage,
// and, inside a tool turn, the turn's calls and the results of those that
// finished. It is written at every turn boundary (the model's turn done
// with its calls; each call's result; the tool turn done) and replaced
// each time; another replica that adopts the generation continues from
// the last one written.

// sealedAgent is a generation's agent as its checkpoints hold it: sealed
// whole under the store's key, or, without one, in the clear without its
// secrets. Encoded once per generation.
type sealedAgent struct {
	data     []byte
	sealed   bool
	withheld bool // secrets were removed
	keyID    string
}

// agentAAD binds a sealed agent to its generation: it cannot be moved to
// another's checkpoint.
func agentAAD(tenant, id string) []byte { return []byte(tenant + "\x00" + id) }

// sealAgent encodes the generation's agent for its checkpoints.
func (g *generation) sealAgent() (*sealedAgent, error) {
	agent := g.plan.agent
	if k := g.s.sealer; k != nil {
		plain, err := proto.Marshal(agent)
		if err != nil {
			return nil, fault.Wrap(fault.Internal, err, "encoding the agent")
		}
		return &sealedAgent{data: k.Seal(plain, agentAAD(g.tenant, g.id)), sealed: true, keyID: k.ID()}, nil
	}
	clear, withheld := withoutSecrets(agent)
	data, err := proto.Marshal(clear)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding the agent")
	}
	return &sealedAgent{data: data, withheld: withheld}, nil
}

// withoutSecrets returns agent without what is secret (a server's
// authorization, its headers' and env variables' values, and its URL's
// path, query and user information, which may carry a token) and whether
// it had any.
func withoutSecrets(agent *agentdv1.Agent) (*agentdv1.Agent, bool) {
	withheld := false
	for _, m := range agent.GetMcps() {
		if m.GetAuthorization() != "" || len(m.GetHeaders()) > 0 || len(m.GetEnv()) > 0 || m.GetUrl() != "" || oauthWithheld(m.GetOauth()) {
			withheld = true
		}
	}
	if !withheld {
		return agent, false
	}
	c := proto.Clone(agent).(*agentdv1.Agent)
	for _, m := range c.GetMcps() {
		m.Authorization = ""
		withoutOAuthSecrets(m.Oauth)
		for k := range m.GetHeaders() {
			m.Headers[k] = ""
		}
		for k := range m.GetEnv() {
			m.Env[k] = ""
		}
		if u := m.GetUrl(); u != "" {
			origin := ""
			if p, err := url.Parse(u); err == nil {
				origin = (&url.URL{Scheme: p.Scheme, Host: p.Host}).String()
			}
			m.Transport = &agentdv1.MCPServer_Url{Url: origin}
		}
	}
	return c, true
}

// openAgent decodes the agent of an adopted generation's checkpoint.
// stale reports that it was sealed under a previous key: the caller seals
// it again (sealAgent) for the generation's later checkpoints.
func (s *Service) openAgent(tenant, id string, cp *statev1.Checkpoint) (agent *agentdv1.Agent, stale bool, err error) {
	data := cp.GetAgent()
	if len(data) == 0 {
		return nil, false, fault.New(fault.FailedPrecondition, "the generation's checkpoint holds no agent")
	}
	if cp.GetAgentSealed() {
		if s.sealer == nil {
			return nil, false, fault.New(fault.FailedPrecondition,
				"the generation's agent is sealed under the encryption key %s, and this replica has none (store.encryption_key_file)", cp.GetKeyId())
		}
		plain, old, err := s.sealer.Open(data, agentAAD(tenant, id))
		if err != nil {
			return nil, false, fault.New(fault.FailedPrecondition,
				"the generation's agent is sealed under the encryption key %s, not one of this replica's %s (store.encryption_key_file, store.previous_encryption_key_files)",
				cp.GetKeyId(), strings.Join(s.sealer.IDs(), ", "))
		}
		data, stale = plain, old
	} else if cp.GetSecretsWithheld() {
		return nil, false, fault.New(fault.FailedPrecondition,
			"the generation's agent declared secrets (authorization, headers, env values, or a url server's URL), which are not stored without store.encryption_key_file, so no other replica can continue it")
	}
	agent = &agentdv1.Agent{}
	if err := proto.Unmarshal(data, agent); err != nil {
		return nil, false, fault.Wrap(fault.Internal, err, "decoding the generation's agent")
	}
	return agent, stale, nil
}

// conversation is the part of a checkpoint, paused or running, that says
// where the generation is: its conversation, usage and tool turns, the
// turn it is in, and the answers it has had.
func (g *generation) conversation(turn *statev1.PausedTurn) *statev1.Checkpoint {
	return &statev1.Checkpoint{
		Version:      checkpointVersion,
		GenerationId: g.id,
		Provider:     g.plan.agent.GetProvider(),
		Model:        g.plan.agent.GetModel(),
		Messages:     g.messages,
		Added:        g.added,
		Usage:        g.total,
		ToolTurns:    int32(g.toolTurns),
		Turn:         turn,
		Answered:     g.answered.list(),
		// The start's span context, for the later runs' links (X-O2).
		OriginTraceId: originTraceID(g.origin),
		OriginSpanId:  originSpanID(g.origin),
		EndUser:       g.endUser,
	}
}

func originTraceID(sc trace.SpanContext) []byte {
	if !sc.IsValid() {
		return nil
	}
	id := sc.TraceID()
	return id[:]
}

func originSpanID(sc trace.SpanContext) []byte {
	if !sc.IsValid() {
		return nil
	}
	id := sc.SpanID()
	return id[:]
}

// checkpointOrigin is the start's span context that cp holds (always a
// sampled one): invalid when it holds none (a start that was not traced
// or sampled, or a checkpoint written before agentd kept it).
func checkpointOrigin(cp *statev1.Checkpoint) trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	if len(cp.GetOriginTraceId()) != len(tid) || len(cp.GetOriginSpanId()) != len(sid) {
		return trace.SpanContext{}
	}
	copy(tid[:], cp.GetOriginTraceId())
	copy(sid[:], cp.GetOriginSpanId())
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// snapshot encodes the generation's running checkpoint: its conversation
// and, inside a tool turn, the turn (its calls, and the results of those
// that finished), with its agent.
func (g *generation) snapshot(turn *statev1.PausedTurn) []byte {
	cp := g.conversation(turn)
	cp.Agent, cp.AgentSealed, cp.SecretsWithheld, cp.KeyId = g.agent.data, g.agent.sealed, g.agent.withheld, g.agent.keyID
	cp.Detached = g.detached
	cp.Resuming = g.resume != nil && !g.resume.progressed
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(cp)
	if err != nil {
		// Messages that were received and decoded encode again.
		panic(fmt.Sprintf("encoding a checkpoint: %v", err))
	}
	return data
}

// checkpoint queues the generation's checkpoint, covering every event
// numbered so far, for its record; a no-op without one.
func (g *generation) checkpoint(turn *statev1.PausedTurn) {
	if g.journal == nil {
		return
	}
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	g.journal.checkpoint(g.snapshot(turn))
}

// setState records that the generation, in tool turn r, waits on its
// client or runs again, with the turn's checkpoint.
func (g *generation) setState(st store.State, r *turnRun) {
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	g.journal.setState(st, g.snapshot(r.runningState()))
}

// runningState is a tool turn's calls and the results it has, for a
// running generation's checkpoint: a call without a result has no state.
func (r *turnRun) runningState() *statev1.PausedTurn {
	t := &statev1.PausedTurn{Turn: int32(r.turn), Calls: r.calls, States: make([]*statev1.CallState, len(r.calls))}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range r.calls {
		st := &statev1.CallState{}
		if res := r.results[i]; res != nil {
			st.State = &statev1.CallState_Result{Result: res}
		} else if r.begun[c.GetId()] {
			t.Started = append(t.Started, c.GetId())
		}
		t.States[i] = st
	}
	return t
}

// answerSet holds the approval and function-call ids a generation has had
// answered: a repeated answer is ignored. Safe for concurrent use (a
// checkpoint lists them while a call's goroutine finishes).
type answerSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (a *answerSet) add(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ids == nil {
		a.ids = make(map[string]bool)
	}
	a.ids[id] = true
}

func (a *answerSet) has(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ids[id]
}

// list returns the ids, sorted.
func (a *answerSet) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(maps.Keys(a.ids))
}
