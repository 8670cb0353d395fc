package server

import (
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/schemacheck"

	"encoding/json"
	"sync"

	"github.com/agentd/agentd/providers"
)

// A server's tool list, as a generation offers it, is made once per
// revision of the bridge's schema cache. The bridge gives each
// list it caches a revision of its own (bridgev1.ServerTools.revision); an
// open session names, per server, the revision agentd last saw for that
// server of that tenant (OpenSessionRequest.known_revisions), and when the
// cache still holds that revision the bridge answers "unchanged" instead
// of copying, sending and agentd decoding and encoding the schemas again.
// The bridge compares a named revision with its entry for the session's
// own server (its key is the tenant, the server's address and credentials
// digest, and allowed_tools), so a hint that is wrong, stale, or meant for
// another server of the same name is only a miss: the list comes in full.

// maxOfferedLists, maxOfferedBytes (the lists' names, descriptions and
// encoded schemas) and maxListHints bound what toolLists keeps: past them
// it forgets entries at random, which costs a later generation a full
// list. A list larger than maxOfferedBytes alone is offered, not kept.
const (
	maxOfferedLists = 512
	maxOfferedBytes = 64 << 20
	maxListHints    = 4096
)

// offeredTool is one tool of a server as the model is offered it, before
// any prefix: its name on the server, its description and its parameters
// encoded (providers.ToolParametersJSON).
type offeredTool struct {
	name        string
	description string
	params      json.RawMessage
	// absent: the server gave no schema (params is the empty object
	// providers.ToolParametersJSON stands in), which usage counts as "{}".
	absent bool
	// invalid says why the schema the server gave is not a JSON Schema
	// (its first problem); "" when it is one. Such a tool is not offered.
	invalid string
}

// offeredList is a server's tool list made for the model. It is shared,
// read-only, by every generation that lists the same revision.
type offeredList []offeredTool

// size is what the list holds, in bytes, for maxOfferedBytes.
func (list offeredList) size() int {
	n := 0
	for _, t := range list {
		n += len(t.name) + len(t.description) + len(t.params)
	}
	return n
}

// newOfferedList makes one server's list, its schemas checked (once per
// revision, as the list is made).
func newOfferedList(tools []*bridgev1.Tool) offeredList {
	out := make(offeredList, len(tools))
	for i, t := range tools {
		schema := t.GetInputSchema()
		out[i] = offeredTool{
			name:        t.GetName(),
			description: t.GetDescription(),
			params:      providers.ToolParametersJSON(&agentdv1.FunctionTool{Parameters: schema}),
			absent:      schema == nil,
		}
		if schema != nil {
			if probs := schemacheck.Check(schema.AsMap()); len(probs) > 0 {
				out[i].invalid = "inputSchema" + probs[0].Path + ": " + probs[0].Description
			}
		}
	}
	return out
}

// listKey names a server of a tenant, by the name the generation gives it.
type listKey struct {
	tenant string
	server string
}

// revisionKey names one revision of a server's list.
type revisionKey struct {
	listKey
	revision uint64
}

// toolLists keeps the offered lists by revision and, per server, the
// revision last seen. It is safe for concurrent use.
type toolLists struct {
	maxBytes int // maxOfferedBytes

	mu    sync.Mutex
	lists map[revisionKey]offeredList
	bytes int // the lists' sizes, summed
	hints map[listKey]uint64
}

func newToolLists() *toolLists {
	return &toolLists{maxBytes: maxOfferedBytes, lists: make(map[revisionKey]offeredList), hints: make(map[listKey]uint64)}
}

// known returns, for each server in order, the revision of its list that
// toolLists holds (0: none), or nil when it holds none of them.
func (l *toolLists) known(tenant string, servers []*bridgev1.ServerSpec) []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []uint64
	for i, s := range servers {
		k := listKey{tenant, s.GetName()}
		r := l.hints[k]
		if r == 0 {
			continue
		}
		if _, ok := l.lists[revisionKey{k, r}]; !ok {
			continue
		}
		if out == nil {
			out = make([]uint64, len(servers))
		}
		out[i] = r
	}
	return out
}

// offered makes what the bridge listed into the lists to offer, in its
// order: an unchanged list is the one kept under its revision, any other
// is made (and kept, if the cache gave it a revision). ok is false when an
// unchanged list is no longer kept: the caller lists again in full.
func (l *toolLists) offered(tenant string, listed []*bridgev1.ServerTools) (_ []offeredList, ok bool) {
	out := make([]offeredList, len(listed))
	for i, st := range listed {
		k := revisionKey{listKey{tenant, st.GetServerName()}, st.GetRevision()}
		if st.GetUnchanged() {
			l.mu.Lock()
			list, kept := l.lists[k]
			l.mu.Unlock()
			if !kept || k.revision == 0 {
				return nil, false
			}
			out[i] = list
			continue
		}
		out[i] = newOfferedList(st.GetTools())
		if k.revision != 0 {
			l.keep(k, out[i])
		}
	}
	return out, true
}

// keep records list as k's, and k's revision as the one its server has
// now, forgetting the list of the revision it had before.
func (l *toolLists) keep(k revisionKey, list offeredList) {
	size := list.size()
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.hints[k.listKey]; ok && old != k.revision {
		l.drop(revisionKey{k.listKey, old})
	}
	if _, ok := l.hints[k.listKey]; !ok && len(l.hints) >= maxListHints {
		for other := range l.hints { // one at random
			l.drop(revisionKey{other, l.hints[other]})
			delete(l.hints, other)
			break
		}
	}
	l.hints[k.listKey] = k.revision
	if size > l.maxBytes {
		return
	}
	l.drop(k) // kept already by a generation that listed it meanwhile
	for len(l.lists) > 0 && (len(l.lists) >= maxOfferedLists || l.bytes+size > l.maxBytes) {
		for other := range l.lists { // one at random
			l.drop(other)
			break
		}
	}
	l.lists[k] = list
	l.bytes += size
}

// drop forgets k's list, if kept. l.mu is held.
func (l *toolLists) drop(k revisionKey) {
	if list, ok := l.lists[k]; ok {
		l.bytes -= list.size()
		delete(l.lists, k)
	}
}
