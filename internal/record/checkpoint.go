package record

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/sealer"
	"github.com/agentd/agentd/internal/store"
)

// A generation's checkpoint, running or paused, is a statev1.Checkpoint:
// the conversation so far, the usage, the tool turns and, inside a tool
// turn, the turn's calls and where each stands. A running generation's
// also holds the agent it runs, so that another replica can adopt it; it
// is written at every turn boundary (the model's turn done with its
// calls; each call's result; the tool turn done) and replaced each time,
// and the replica that adopts the generation continues from the last one
// written. It names its conversation rather than holding it: the journal
// stores each message once, as an item, and what the log holds already
// not at all (items.go); Restore rebuilds it. A paused generation's waits
// in the checkpoint store for its resume, whole.

// Version is the format of the checkpoints this agentd writes.
const Version = 1

// Encode encodes a checkpoint, deterministically.
func Encode(cp *statev1.Checkpoint) []byte {
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(cp)
	if err != nil {
		// Messages that were received and decoded encode again.
		panic(fmt.Sprintf("encoding a checkpoint: %v", err))
	}
	return data
}

// DecodeRunning decodes a running generation's checkpoint, refusing one
// this agentd cannot read: another version's, another generation's, or a
// turn whose calls and states do not pair up.
func DecodeRunning(data []byte, id string) (*statev1.Checkpoint, error) {
	cp := &statev1.Checkpoint{}
	if err := proto.Unmarshal(data, cp); err != nil || cp.GetVersion() != Version || cp.GetGenerationId() != id {
		return nil, fault.New(fault.FailedPrecondition, "the generation's checkpoint cannot be read by this agentd")
	}
	if t := cp.GetTurn(); t != nil && !t.GetCallsInConversation() && len(t.GetStates()) != len(t.GetCalls()) {
		return nil, fault.New(fault.FailedPrecondition, "the generation's checkpoint cannot be read by this agentd")
	}
	return cp, nil
}

// SealedAgent is a generation's agent as its checkpoints hold it: sealed
// whole under the store's key, or, without one, in the clear without its
// secrets. Encoded once per generation.
type SealedAgent struct {
	data     []byte
	sealed   bool
	withheld bool // secrets were removed
	keyID    string
}

// agentAAD binds a sealed agent to its generation: it cannot be moved to
// another's checkpoint.
func agentAAD(tenant, id string) []byte { return []byte(tenant + "\x00" + id) }

// SealAgent encodes tenant's generation id's agent for its checkpoints:
// sealed under k, or, when k is nil, without its secrets.
func SealAgent(k *sealer.Keyring, tenant, id string, agent *agentdv1.Agent) (*SealedAgent, error) {
	if k != nil {
		plain, err := proto.Marshal(agent)
		if err != nil {
			return nil, fault.Wrap(fault.Internal, err, "encoding the agent")
		}
		return &SealedAgent{data: k.Seal(plain, agentAAD(tenant, id)), sealed: true, keyID: k.ID()}, nil
	}
	clear, withheld := withoutSecrets(agent)
	data, err := proto.Marshal(clear)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding the agent")
	}
	return &SealedAgent{data: data, withheld: withheld}, nil
}

// Put puts the agent into cp.
func (a *SealedAgent) Put(cp *statev1.Checkpoint) {
	cp.Agent, cp.AgentSealed, cp.SecretsWithheld, cp.KeyId = a.data, a.sealed, a.withheld, a.keyID
}

// AgentOf is the agent cp holds, as it holds it.
func AgentOf(cp *statev1.Checkpoint) *SealedAgent {
	return &SealedAgent{data: cp.GetAgent(), sealed: cp.GetAgentSealed(), withheld: cp.GetSecretsWithheld(), keyID: cp.GetKeyId()}
}

// OpenAgent decodes the agent of a generation's running checkpoint,
// opened with k: for a replica that adopts the generation, or a resume
// that does not give the agent again. stale reports that it was sealed
// under a previous key: the caller seals it again for the generation's
// later checkpoints. An agent that cannot stand for the one the
// generation started with is FailedPrecondition, saying why.
func OpenAgent(k *sealer.Keyring, tenant, id string, cp *statev1.Checkpoint) (agent *agentdv1.Agent, stale bool, err error) {
	data := cp.GetAgent()
	if len(data) == 0 {
		return nil, false, fault.New(fault.FailedPrecondition, "the generation's record holds no agent")
	}
	if cp.GetAgentSealed() {
		if k == nil {
			return nil, false, fault.New(fault.FailedPrecondition,
				"the generation's agent is sealed under the encryption key %s, and this agentd has none (store.encryption_key_file)", cp.GetKeyId())
		}
		plain, old, err := k.Open(data, agentAAD(tenant, id))
		if err != nil {
			return nil, false, fault.New(fault.FailedPrecondition,
				"the generation's agent is sealed under the encryption key %s, not one of this agentd's %s (store.encryption_key_file, store.previous_encryption_key_files)",
				cp.GetKeyId(), strings.Join(k.IDs(), ", "))
		}
		data, stale = plain, old
	} else if cp.GetSecretsWithheld() {
		return nil, false, fault.New(fault.FailedPrecondition,
			"the generation's agent declared secrets (authorization, headers, env values, or a url server's URL), which agentd does not store without store.encryption_key_file")
	}
	agent = &agentdv1.Agent{}
	if err := proto.Unmarshal(data, agent); err != nil {
		return nil, false, fault.Wrap(fault.Internal, err, "decoding the generation's agent")
	}
	return agent, stale, nil
}

// StoredAgent is the agent of tenant's live generation id as its record
// keeps it, opened with k (OpenAgent): the record keeps it from the
// generation's start while it runs and while it is paused, and drops it
// when the generation ends. It stands for the agent that a resume, or
// another answer to what the generation waits for, would otherwise have
// to give again. An ended generation, or none, is NotFound.
func StoredAgent(ctx context.Context, gens store.Generations, k *sealer.Keyring, tenant, id string) (*agentdv1.Agent, error) {
	rec, err := gens.Get(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if rec.State.Finished() {
		return nil, fault.New(fault.NotFound, "the generation %q has ended, and its record keeps its agent no more", id)
	}
	cp, err := DecodeRunning(rec.Checkpoint, id)
	if err != nil {
		return nil, err
	}
	if len(cp.GetAgent()) == 0 {
		// Kept beside the checkpoint (Journal.takeAgent).
		if cp.Agent, err = gens.Agent(ctx, tenant, id); err != nil {
			return nil, err
		}
	}
	agent, _, err := OpenAgent(k, tenant, id, cp)
	return agent, err
}

// withoutSecrets returns agent without what is secret (a server's
// authorization, its headers' and env variables' values, its oauth
// block's client secret, private key, identity provider's client secret
// and ID token, and its URL's path, query and
// user information, which may carry a token) and whether it had any.
func withoutSecrets(agent *agentdv1.Agent) (*agentdv1.Agent, bool) {
	if !slices.ContainsFunc(agent.GetMcps(), holdsSecrets) {
		return agent, false
	}
	c := proto.CloneOf(agent)
	for _, m := range c.GetMcps() {
		m.Authorization = ""
		if o := m.Oauth; o != nil {
			o.ClientSecret, o.PrivateKey = "", ""
			if idp := o.IdentityProvider; idp != nil {
				idp.ClientSecret, idp.IdToken = "", ""
			}
		}
		for k := range m.GetHeaders() {
			m.Headers[k] = ""
		}
		for k := range m.GetEnv() {
			m.Env[k] = ""
		}
		if u := m.GetUrl(); u != "" {
			m.Transport = &agentdv1.MCPServer_Url{Url: origin(u)}
		}
	}
	return c, true
}

// holdsSecrets reports whether a server declaration holds anything
// withoutSecrets removes.
func holdsSecrets(m *agentdv1.MCPServer) bool {
	o := m.GetOauth()
	return m.GetAuthorization() != "" || len(m.GetHeaders()) > 0 || len(m.GetEnv()) > 0 || m.GetUrl() != "" ||
		o.GetClientSecret() != "" || o.GetPrivateKey() != "" ||
		o.GetIdentityProvider().GetClientSecret() != "" || o.GetIdentityProvider().GetIdToken() != ""
}

// origin is a URL's scheme and host alone; "" if it does not parse.
func origin(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: p.Scheme, Host: p.Host}).String()
}

// SetOrigin keeps in cp the span context of the generation start's
// invoke_agent span: the spans of its later runs (a resume, an adoption)
// link to it. An invalid one is not kept.
func SetOrigin(cp *statev1.Checkpoint, sc trace.SpanContext) {
	if !sc.IsValid() {
		return
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	cp.OriginTraceId, cp.OriginSpanId = tid[:], sid[:]
}

// Origin is the start's span context that cp holds (always a sampled
// one): invalid when it holds none (a start that was not traced or
// sampled, or a checkpoint written before agentd kept it).
func Origin(cp *statev1.Checkpoint) trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	if len(cp.GetOriginTraceId()) != len(tid) || len(cp.GetOriginSpanId()) != len(sid) {
		return trace.SpanContext{}
	}
	copy(tid[:], cp.GetOriginTraceId())
	copy(sid[:], cp.GetOriginSpanId())
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}
