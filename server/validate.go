package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpdecl"
	"github.com/agentd/agentd/internal/policy"
	"github.com/agentd/agentd/internal/pricing"
	"github.com/agentd/agentd/internal/schemacheck"
	"github.com/agentd/agentd/providers"
)

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// newPlan validates a request (an agent and its conversation) of tenant
// and resolves it with the tenant's providers and rules. root prefixes
// field paths ("start", "resume" or "" for Preview). Every problem is
// reported at once, as field violations: what the tenant's rules refuse,
// and what agentd's configuration lacks for it, with the rest, by
// refusal's rule.
func (s *Service) newPlan(root string, tenant *Tenant, agent *agentdv1.Agent, messages []*agentdv1.Message, answerTimeout *durationValue) (*plan, error) {
	var v, denied, unset violations
	field := func(f string) string {
		if root == "" {
			return f
		}
		return root + "." + f
	}
	p := &plan{tenant: tenant, agent: agent, messages: messages, answerTimeout: s.cfg.AnswerTimeout}
	if agent == nil {
		v.add(field("agent"), "is required")
		return nil, fault.InvalidRequest(v)
	}
	s.planProvider(&v, &unset, field, p)
	s.planOutput(&v, field, p)
	if len(messages) == 0 {
		v.add(field("messages"), "needs at least one message")
	}
	for i, m := range messages {
		validateMessage(&v, field(fmt.Sprintf("messages[%d]", i)), m)
	}
	toolNames := validateTools(&v, field, agent.GetTools())
	s.planSettings(&v, field, p, answerTimeout)
	s.planLimits(&v, &unset, field, p)
	s.planServers(&v, &denied, field, p)
	if p.provider != nil {
		// Placement problems are reported with the others, for every
		// server whose transport is known.
		p.place(&v, toolNames, field("agent.mcps"))
		p.checkAddresses(&denied)
	}
	if err := refusal(v, denied, unset); err != nil {
		return nil, err
	}
	return p, nil
}

// refusal is the error that refuses a request for its problems:
// policy.Refusal's for the invalid and the denied ones, with what agentd's
// configuration lacks for it (unset) among the denied; and when that is
// all, FailedPrecondition: the request is right, and whoever runs agentd,
// not its caller, has something to set. Nil when there is no problem.
func refusal(invalid, denied, unset violations) error {
	if len(invalid) > 0 || len(denied) > 0 || len(unset) == 0 {
		return policy.Refusal(invalid, slices.Concat(denied, unset))
	}
	err := fault.InvalidRequest(unset)
	err.Kind = fault.FailedPrecondition
	err.Msg = "agentd's configuration lacks what this request needs: " + strings.TrimPrefix(err.Msg, "invalid request: ")
	return err
}

// planProvider finds the provider the agent names and checks its model,
// and, in unset, that agentd's configuration gives the provider what it
// needs to serve it (its API key).
func (s *Service) planProvider(v, unset *violations, field func(string) string, p *plan) {
	agent, reg := p.agent, p.tenant.Providers
	provider, ok := reg.Lookup(agent.GetProvider())
	switch {
	case agent.GetProvider() == "":
		v.add(field("agent.provider"), "is required; one of %s", strings.Join(reg.Names(), ", "))
	case !ok:
		v.add(field("agent.provider"), "unknown provider %q; one of %s", agent.GetProvider(), strings.Join(reg.Names(), ", "))
	default:
		p.provider = provider
		if agent.GetModel() == "" && !provider.Capabilities().ModelOptional {
			v.add(field("agent.model"), "is required for provider %q", agent.GetProvider())
		} else if mv, ok := provider.(providers.ModelValidator); ok {
			if err := mv.ValidateModel(agent.GetModel()); err != nil {
				v.add(field("agent.model"), "%s", err.Error())
			}
		}
		p.checkConfigured(unset, field("agent.provider"))
	}
}

// checkConfigured reports in unset, at f, what the provider lacks of
// agentd's configuration to serve the agent's model: the setting to set,
// and, for a configured tenant, its own.
func (p *plan) checkConfigured(unset *violations, f string) {
	cc, ok := p.provider.(providers.ConfigChecker)
	if !ok {
		return
	}
	err := cc.CheckConfig(p.agent.GetModel())
	switch {
	case err == nil:
	case p.tenant.ProvidersSetting != "":
		unset.add(f, "%s, or under %s for this tenant alone", err.Error(), p.tenant.ProvidersSetting)
	default:
		unset.add(f, "%s", err.Error())
	}
}

// validateTools checks the agent's function tools and returns the index
// of each by name.
func validateTools(v *violations, field func(string) string, tools []*agentdv1.FunctionTool) map[string]int {
	toolNames := make(map[string]int)
	for i, t := range tools {
		f := field(fmt.Sprintf("agent.tools[%d]", i))
		if !toolNamePattern.MatchString(t.GetName()) {
			v.add(f+".name", "must be 1 to 64 characters of letters, digits, '_' and '-'")
		} else if j, dup := toolNames[t.GetName()]; dup {
			v.add(f+".name", "%q is also the name of agent.tools[%d]", t.GetName(), j)
		} else {
			toolNames[t.GetName()] = i
		}
		if params := t.GetParameters(); params != nil {
			if typ, ok := params.GetFields()["type"]; ok && typ.GetStringValue() != "object" {
				v.add(f+".parameters", `must be a JSON Schema of "type": "object"`)
			}
			// The model is sent it: a broken one is refused here, before
			// anything is recorded or connects, not by the provider later.
			for _, prob := range schemacheck.Check(params.AsMap()) {
				v.add(f+".parameters"+prob.Path, "is not a JSON Schema: %s", prob.Description)
			}
		}
	}
	return toolNames
}

// planSettings checks the agent's settings (mcp_strategy,
// tool_name_conflict, requires_approval, context, provider_options)
// and the request's answer_timeout, and takes the answer timeout.
func (s *Service) planSettings(v *violations, field func(string) string, p *plan, answerTimeout *durationValue) {
	agent := p.agent
	if _, ok := agentdv1.MCPStrategy_name[int32(agent.GetMcpStrategy())]; !ok {
		v.add(field("agent.mcp_strategy"), "unknown strategy %d; one of AUTO, CLIENT, SERVER", agent.GetMcpStrategy())
	}
	if _, ok := agentdv1.ToolNameConflict_name[int32(agent.GetToolNameConflict())]; !ok {
		v.add(field("agent.tool_name_conflict"), "unknown value %d; one of REFUSE, PREFIX", agent.GetToolNameConflict())
	}
	for i, name := range agent.GetRequiresApproval() {
		if name == "" {
			v.add(field(fmt.Sprintf("agent.requires_approval[%d]", i)), "must not be empty")
		}
	}
	validateContext(v, field, agent.GetContext())
	s.planAnswerTimeout(v, field, p, answerTimeout)
	if ov, ok := p.provider.(providers.OptionsValidator); ok {
		for _, prob := range ov.ValidateOptions(p.options()) {
			v.add(field("agent.provider_options."+prob.Field), "%s", prob.Description)
		}
	}
}

// validateContext checks the agent's context policy, if it sets one: its
// numbers of tokens are not negative.
func validateContext(v *violations, field func(string) string, c *agentdv1.ContextPolicy) {
	if n := c.GetMaxInputTokens(); n < 0 {
		v.add(field("agent.context.max_input_tokens"), "must not be negative, got %d", n)
	}
	if n := c.GetReserveOutputTokens(); n < 0 {
		v.add(field("agent.context.reserve_output_tokens"), "must not be negative, got %d", n)
	}
}

// planAnswerTimeout checks the request's answer_timeout, if it sets one:
// a valid duration within generation.max_answer_timeout.
func (s *Service) planAnswerTimeout(v *violations, field func(string) string, p *plan, answerTimeout *durationValue) {
	if answerTimeout == nil {
		return
	}
	switch d := answerTimeout.d; {
	case !answerTimeout.valid || d < 0:
		v.add(field(answerTimeout.field), "must be a valid, non-negative duration")
	case d > s.cfg.MaxAnswerTimeout:
		v.add(field(answerTimeout.field), "must be at most %s (generation.max_answer_timeout)", s.cfg.MaxAnswerTimeout)
	default:
		p.answerTimeout = d
	}
}

// planServers validates and names the agent's MCP servers, in declaration
// order; names must be distinct. What the tenant's rules refuse goes to
// denied.
func (s *Service) planServers(v, denied *violations, field func(string) string, p *plan) {
	names := make(map[string]int)
	for i, decl := range p.agent.GetMcps() {
		sp := s.planServer(v, field(fmt.Sprintf("agent.mcps[%d]", i)), decl)
		p.checkCommand(denied, sp)
		p.checkRef(denied, sp)
		if sp.transport == agentdv1.Transport_TRANSPORT_UNSPECIFIED {
			// Already refused; its name may be a stand-in.
		} else if j, dup := names[sp.name]; dup {
			v.add(sp.field+".name", "%q is also the name of agent.mcps[%d]; set distinct names", sp.name, j)
		} else {
			names[sp.name] = i
		}
		p.servers = append(p.servers, sp)
	}
}

func validateMessage(v *violations, f string, m *agentdv1.Message) {
	switch m.GetRole() {
	case agentdv1.Role_ROLE_USER, agentdv1.Role_ROLE_ASSISTANT, agentdv1.Role_ROLE_TOOL:
	default:
		v.add(f+".role", "must be USER, ASSISTANT or TOOL")
	}
	if len(m.GetParts()) == 0 {
		v.add(f+".parts", "needs at least one part")
	}
	for j, part := range m.GetParts() {
		pf := fmt.Sprintf("%s.parts[%d]", f, j)
		switch k := part.GetKind().(type) {
		case nil:
			v.add(pf, "is empty")
		case *agentdv1.Part_ToolCall:
			if m.GetRole() != agentdv1.Role_ROLE_ASSISTANT {
				v.add(pf, "tool_call parts belong to ASSISTANT messages")
			}
			if k.ToolCall.GetId() == "" || k.ToolCall.GetName() == "" {
				v.add(pf+".tool_call", "needs id and name")
			}
		case *agentdv1.Part_ToolResult:
			if m.GetRole() != agentdv1.Role_ROLE_TOOL {
				v.add(pf, "tool_result parts belong to TOOL messages")
			}
			if k.ToolResult.GetToolCallId() == "" {
				v.add(pf+".tool_result.tool_call_id", "is required")
			}
		}
	}
}

// planServer validates one declaration by the rules of declarations
// (mcpdecl) and names it; a ref: to a url server registered in agentd's
// configuration is resolved here, agentd being its client. Secrets are
// never echoed: problems name fields, not values.
func (s *Service) planServer(v *violations, f string, decl *agentdv1.MCPServer) *serverPlan {
	sp := &serverPlan{decl: decl, field: f}
	var p mcpdecl.Problems
	if reg := s.registered[decl.GetRef()]; decl.GetRef() != "" && reg != nil {
		sp.planRegisteredURL(&p, reg)
		sp.readTimeout = mcpdecl.DefaultReadTimeout
		if d, ok := mcpdecl.CheckReadTimeout(&p, sp.decl); ok {
			sp.readTimeout = d
		}
		mcpdecl.CheckUse(&p, decl)
	} else {
		var srv mcpdecl.Server
		srv, p = mcpdecl.Check(decl)
		s.oauth.CheckIdentity(&p, decl.GetOauth())
		sp.name, sp.transport, sp.readTimeout = srv.Name, srv.Transport, srv.ReadTimeout
	}
	*v = append(*v, p.Under(f)...)
	return sp
}

// planRegisteredURL resolves a ref: to the registered url server reg. The
// request names it and may set what shapes its use (name, read_timeout,
// max_reconnection_wait, allowed_tools, require_approval); where it is
// and how agentd authenticates (its url, headers, authorization, oauth)
// are the registration's, which the request cannot replace.
func (sp *serverPlan) planRegisteredURL(p *mcpdecl.Problems, reg *agentdv1.MCPServer) {
	decl := sp.decl
	sp.transport, sp.ref = agentdv1.Transport_TRANSPORT_HTTP, decl.GetRef()
	var set []string
	for _, o := range []struct {
		set  bool
		name string
	}{
		{decl.GetAuthorization() != "", "authorization"}, {len(decl.GetHeaders()) > 0, "headers"}, {decl.GetOauth() != nil, "oauth"},
		{len(decl.GetArgs()) > 0, "args"}, {len(decl.GetEnv()) > 0, "env"}, {len(decl.GetUnsetEnv()) > 0, "unset_env"},
	} {
		if o.set {
			set = append(set, o.name)
		}
	}
	if len(set) > 0 {
		p.Add("", "%q is a url server registered under bridge.servers, whose url, headers, authorization and oauth are its registration's; beside ref: a request may set name, read_timeout, max_reconnection_wait, allowed_tools and require_approval, not %s",
			sp.decl.GetRef(), sentence(set))
	}
	mcpdecl.CheckReconnectionWait(p, decl)
	if sp.name = decl.GetName(); sp.name == "" {
		sp.name = sp.ref
	}
	resolved := proto.CloneOf(reg)
	resolved.Name, resolved.AllowedTools, resolved.RequireApproval = decl.GetName(), decl.GetAllowedTools(), decl.GetRequireApproval()
	if decl.GetReadTimeout() != nil {
		resolved.ReadTimeout = decl.GetReadTimeout()
	}
	if decl.GetMaxReconnectionWait() != nil {
		resolved.MaxReconnectionWait = decl.GetMaxReconnectionWait()
	}
	sp.decl = resolved
}

// planLimits checks the agent's limits (max_tool_turns, limits), each
// within its bounds and the tenant's ceiling, and takes them, with the
// tenant's defaults where it sets none. A limit of money needs the
// model's price in its currency: what agentd's price table lacks for it
// goes to unset.
func (s *Service) planLimits(v, unset *violations, field func(string) string, p *plan) {
	l := &p.limits
	gl := config.Default().GenerationLimits
	if p.tenant.GenerationLimits != nil {
		gl = *p.tenant.GenerationLimits
	}
	l.defaults(gl, s.cfg.MaxToolTurns)
	agent, req := p.agent, cmp.Or(p.agent.GetLimits(), &agentdv1.GenerationLimits{})
	if agent.MaxToolTurns != nil {
		l.take(v, field("agent.max_tool_turns"), limitToolTurns, int64(agent.GetMaxToolTurns()), config.MaxToolTurnsLimit)
	}
	if req.MaxToolCalls != nil {
		l.take(v, field("agent.limits.max_tool_calls"), limitToolCalls, int64(req.GetMaxToolCalls()), config.MaxToolCallsLimit)
	}
	if req.MaxTotalTokens != nil {
		l.take(v, field("agent.limits.max_total_tokens"), limitTokens, req.GetMaxTotalTokens(), 0)
	}
	if d := req.GetMaxDuration(); d != nil {
		if d.CheckValid() != nil || d.AsDuration() < time.Millisecond {
			v.add(field("agent.limits.max_duration"), "must be a valid duration of at least 1ms")
		} else {
			l.take(v, field("agent.limits.max_duration"), limitDuration, d.AsDuration().Milliseconds(), 0)
		}
	}
	if m := req.GetMaxCost(); m != nil {
		l.takeCost(v, field("agent.limits.max_cost"), m, gl.Ceilings.MaxCost)
	}
	if _, ok := agentdv1.OnLimit_name[int32(req.GetOnLimit())]; !ok {
		v.add(field("agent.limits.on_limit"), "unknown value %d; one of END, PAUSE, FAIL", req.GetOnLimit())
	}
	l.onLimit = req.GetOnLimit()
	s.checkPriced(v, unset, field("agent.limits.max_cost"), p, req.GetMaxCost() != nil)
}

// defaults sets l to the limits gl gives a generation whose agent sets
// none, maxToolTurns the default of max_tool_turns where gl has none, and
// to gl's ceilings: a ceiling without a default is the default too, and
// max_tool_turns and max_tool_calls have bounds of their own.
func (l *limitSet) defaults(gl config.GenerationLimits, maxToolTurns int) {
	d, c := gl.Defaults, gl.Ceilings
	cost := func(m *config.Money) int64 {
		if m == nil {
			return 0
		}
		n, _ := m.Nanos()
		return n
	}
	l.ceilings = [limitKinds]int64{int64(c.MaxToolTurns), int64(c.MaxToolCalls), int64(c.MaxTotalTokens), cost(c.MaxCost), c.MaxDuration.Milliseconds()}
	l.values = [limitKinds]int64{int64(cmp.Or(d.MaxToolTurns, maxToolTurns)), int64(d.MaxToolCalls), int64(d.MaxTotalTokens), cost(d.MaxCost), d.MaxDuration.Milliseconds()}
	for k := limitToolCalls; k < limitKinds; k++ {
		l.values[k] = cmp.Or(l.values[k], l.ceilings[k])
	}
	if m := cmp.Or(d.MaxCost, c.MaxCost); m != nil {
		l.currency = m.Currency
	}
	l.ceilings[limitToolTurns] = min(cmp.Or(l.ceilings[limitToolTurns], config.MaxToolTurnsLimit), config.MaxToolTurnsLimit)
	l.ceilings[limitToolCalls] = cmp.Or(l.ceilings[limitToolCalls], config.MaxToolCallsLimit)
	l.values[limitToolTurns] = min(l.values[limitToolTurns], l.ceilings[limitToolTurns])
}

// take takes n, the agent's value of limit k at field f, unless it is
// beyond its bound (hard; 0 for none) or the tenant's ceiling.
func (l *limitSet) take(v *violations, f string, k limitKind, n, hard int64) {
	ceiling := l.ceilings[k]
	switch {
	case hard > 0 && (n < 1 || n > hard):
		v.add(f, "must be 1..%d, got %d", hard, n)
	case n < 1:
		v.add(f, "must be positive, got %d", n)
	case ceiling > 0 && n > ceiling:
		v.add(f, "must be at most this tenant's ceiling, %d %s (generation_limits.ceilings.%s), got %d", ceiling, limitUnits[k], limitNames[k], n)
	default:
		l.values[k] = n
	}
}

// takeCost takes m, the agent's max_cost at field f, unless it is no
// amount of a currency or beyond the tenant's ceiling.
func (l *limitSet) takeCost(v *violations, f string, m *agentdv1.Money, ceiling *config.Money) {
	switch limit := l.ceilings[limitCost]; {
	case !pricing.ValidCurrency(m.GetCurrency()):
		v.add(f+".currency", "%q is not an ISO 4217 currency code; write its three capital letters, e.g. USD or EUR", m.GetCurrency())
	case m.GetNanos() < 1:
		v.add(f+".nanos", "must be positive, got %d", m.GetNanos())
	case ceiling != nil && m.GetCurrency() != ceiling.Currency:
		v.add(f+".currency", "must be %s, the currency of this tenant's ceiling (generation_limits.ceilings.max_cost)", ceiling.Currency)
	case limit > 0 && m.GetNanos() > limit:
		v.add(f+".nanos", "must be at most this tenant's ceiling, %s %s (generation_limits.ceilings.max_cost), got %s", decimal(limit), ceiling.Currency, decimal(m.GetNanos()))
	default:
		l.values[limitCost], l.currency = m.GetNanos(), m.GetCurrency()
	}
}

// checkPriced checks that agentd can hold the generation to its max_cost,
// at f: it prices the model, in the limit's currency. A limit the agent
// sets (own) in another currency is invalid; anything else is what
// agentd's configuration lacks for it (unset).
func (s *Service) checkPriced(v, unset *violations, f string, p *plan, own bool) {
	if p.limits.values[limitCost] == 0 || p.provider == nil {
		return
	}
	from := "agent.limits.max_cost"
	if !own {
		from = "the tenant's default max_cost (generation_limits.defaults)"
	}
	if s.prices == nil {
		unset.add(f, "%s needs agentd's price table, and this agentd prices no model calls", from)
		return
	}
	provider, model := pricedAs(p.provider, p.agent.GetProvider(), p.agent.GetModel())
	switch c := s.prices.Cost(provider, model, &agentdv1.Usage{}); {
	case c.GetUnknown():
		unset.add(f, "agentd's price table has no price for %s's model %q, so %s cannot be held; add one under pricing.models", provider, model, from)
	case c.GetCurrency() != p.limits.currency && own:
		v.add(f+".currency", "must be %s, the currency of %s's price for %q", c.GetCurrency(), provider, model)
	case c.GetCurrency() != p.limits.currency:
		unset.add(f, "%s is in %s, but %s's model %q is priced in %s", from, p.limits.currency, provider, model, c.GetCurrency())
	}
}
