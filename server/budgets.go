package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/budget"
	"github.com/agentd/agentd/internal/contextfit"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// budgetsFresh is how long a replica uses the budgets it read from the
// store before it reads them again: a budget set through the admin API
// applies on every replica within it.
const budgetsFresh = time.Second

// reservationTTL is how long a model call's reservation counts against
// its budgets when the replica that made it never settles it (it died).
const reservationTTL = 10 * time.Minute

// defaultOutputTokens is the output a model call is expected to use at
// most when the agent's provider options set no max_tokens: Anthropic's
// default.
const defaultOutputTokens = 4096

// spending holds model calls to their tenants' budgets, through the
// store every replica shares, and counts every call in the usage ledger.
// Safe for concurrent use.
type spending struct {
	store store.Budgets
	now   func() time.Time

	// cacheMu guards the budgets read from the store: one read at a
	// time, the others waiting for it.
	cacheMu  sync.Mutex
	loadedAt time.Time
	byTenant map[string][]*budget.Budget // set through the admin API

	mu    sync.Mutex
	slots map[slotKey]*slot // the budget subjects this replica holds allowances of
	seq   atomic.Uint64     // numbers the reservations' ids
	log   *slog.Logger

	ledger ledger
}

// newSpendingOf is the spending of model calls held to the budgets st
// keeps; nil without st.
func newSpendingOf(st store.Budgets, log *slog.Logger) *spending {
	if st == nil {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &spending{store: st, now: time.Now, log: log, slots: make(map[slotKey]*slot), ledger: ledger{rows: make(map[ledgerKey]*store.UsageEntry)}}
}

// stored returns tenant's budgets set through the admin API, read again
// from the store once they are budgetsFresh old.
//
// A read that fails keeps the budgets read before (logged), so that a
// store that blinks holds no model call; only a replica that never read
// them fails its calls.
func (s *spending) stored(ctx context.Context, tenant string) ([]*budget.Budget, error) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if now := s.now(); s.byTenant == nil || now.Sub(s.loadedAt) >= budgetsFresh {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), store.Timeout)
		defer cancel()
		defs, err := s.store.ListBudgets(rctx)
		switch {
		case err != nil && s.byTenant == nil:
			return nil, err
		case err != nil:
			s.log.Warn("reading the budgets again; the ones read before hold", "err", err)
			s.loadedAt = now
		default:
			s.byTenant, s.loadedAt = parseStored(defs), now
		}
	}
	return s.byTenant[tenant], nil
}

// parseStored are the stored budgets by tenant; one whose specification
// no longer parses (written by a newer agentd) is left out.
func parseStored(defs []store.BudgetDef) map[string][]*budget.Budget {
	out := make(map[string][]*budget.Budget)
	for _, d := range defs {
		spec := &agentdv1.Budget{}
		if proto.Unmarshal(d.Spec, spec) != nil {
			continue
		}
		if b, bad := budget.Parse(spec, "budget"); bad == nil {
			out[d.Tenant] = append(out[d.Tenant], b)
		}
	}
	return out
}

// budgetHold is a model call's part of the allowances of the budgets
// that apply to it.
type budgetHold struct {
	budgets []*budget.Budget
	taken   []taken
}

// reserveBudgets takes what the next model call (named by call) is
// expected to use (estimate, asked only where a budget applies) from this replica's allowance of every budget of the
// generation's tenant that applies to it (asking the store for one where
// it holds none, or too little); nil when no budget applies. A budget
// already spent refuses the call with its error.
func (g *generation) reserveBudgets(ctx context.Context, estimate func() *agentdv1.Usage, call string) (*budgetHold, error) {
	sp := g.s.spending
	if sp == nil {
		return nil, nil
	}
	budgets, charges, err := g.applicable(ctx)
	if len(budgets) == 0 || err != nil {
		return nil, err
	}
	est := estimate()
	hold := &budgetHold{}
	for i, b := range budgets {
		t, err := g.takeBudget(ctx, b, charges[i], store.Spent{Tokens: totalTokens(est), Nanos: nanosIn(b, est.GetCost())}, call)
		if err != nil {
			g.settleBudgets(ctx, hold, nil) // what the other budgets gave
			return nil, wrapUnavailable(err)
		}
		hold.budgets, hold.taken = append(hold.budgets, b), append(hold.taken, t)
	}
	return hold, nil
}

// heldTries bounds how many times a call waits for the allowances that
// hold a budget (reserved, not spent) to come back, allowanceIdle each.
const heldTries = 5

// takeBudget takes est from the allowance of budget b's subject c for
// one call (named by call). Where the budget is held by allowances, not
// spent (calls under way, here or on other replicas, reserved what is
// left), it waits for them to come back, up to heldTries times; where it
// is spent, it refuses the call with the budget's error.
func (g *generation) takeBudget(ctx context.Context, b *budget.Budget, c store.Charge, est store.Spent, call string) (taken, error) {
	sp := g.s.spending
	for try := 1; ; try++ {
		t, settled, refused, err := sp.take(ctx, c, est, g.id+":"+call)
		if settled != nil {
			g.warnBudget(ctx, b, c, *settled)
		}
		switch {
		case err != nil:
			return taken{}, err
		case refused == nil:
			return t, nil
		case refused.spent.reaches(c) || try == heldTries:
			return taken{}, g.budgetRefused(ctx, b, refused.charge, store.Spent(refused.spent), sp.now(), call != sampleCall)
		}
		select {
		case <-ctx.Done():
			return taken{}, context.Cause(ctx)
		case <-time.After(allowanceIdle):
		}
	}
}

// wrapUnavailable classifies a store's failure to hold a call to its
// budgets; a budget's refusal, and an error classified already, pass as
// they are.
func wrapUnavailable(err error) error {
	var f *fault.Error
	var at *atBudget
	if errors.As(err, &f) || errors.As(err, &at) {
		return err
	}
	return fault.Wrap(fault.Unavailable, err, "the generation's budgets could not be checked")
}

// applicable are the budgets that apply to the generation's model calls
// now, each with its subject's charge (without amounts).
func (g *generation) applicable(ctx context.Context) ([]*budget.Budget, []store.Charge, error) {
	stored, err := g.s.spending.stored(ctx, g.tenant)
	if err != nil {
		return nil, nil, fault.Wrap(fault.Unavailable, err, "the tenant's budgets could not be read")
	}
	var own []*budget.Budget
	if g.plan.tenant != nil {
		own = g.plan.tenant.Budgets
	}
	if len(own)+len(stored) == 0 {
		return nil, nil, nil
	}
	now := g.s.spending.now()
	var budgets []*budget.Budget
	var charges []store.Charge
	for _, b := range append(own[:len(own):len(own)], stored...) {
		subject, ok := b.Subject(g.startedBy, g.endUser)
		if !ok {
			continue
		}
		span := b.SpanAt(now)
		tokens, nanos, _ := b.Limits()
		budgets = append(budgets, b)
		charges = append(charges, store.Charge{Tenant: g.tenant, Budget: b.Name(), Subject: subject,
			From: span.From, Bucket: span.Bucket, MaxTokens: tokens, MaxNanos: nanos})
	}
	return budgets, charges, nil
}

// estimate is what a model call sending msgs with instructions (and the
// generation's tools) is expected to use at most: its input as the
// context estimate counts it, and output tokens, priced.
func (g *generation) estimate(msgs []*agentdv1.Message, instructions string, output int64) *agentdv1.Usage {
	input := contextfit.Estimate(msgs) + contextfit.Tokens(int64(len(instructions))+g.schemaBytes)
	u := &agentdv1.Usage{InputTokens: input, OutputTokens: output}
	if g.s.prices != nil {
		provider, model := pricedAs(g.plan.provider, g.plan.agent.GetProvider(), g.plan.agent.GetModel())
		u.Cost = g.s.prices.Cost(provider, model, u)
	}
	return u
}

// maxOutputTokens is the output the provider options allow a model call,
// by the names the providers give it; defaultOutputTokens when they set
// none.
func maxOutputTokens(opts map[string]any) int64 {
	for _, key := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens", "num_predict"} {
		if n, ok := opts[key].(float64); ok && n > 0 {
			return int64(n)
		}
	}
	return defaultOutputTokens
}

// settleBudgets counts what a model call used, u (nil: nothing known),
// in the usage ledger and in the allowances hold took from (nil: none),
// and warns once per budget and period when the store, settling an
// allowance, reports its subject past its soft threshold.
func (g *generation) settleBudgets(ctx context.Context, hold *budgetHold, u *agentdv1.Usage) {
	if u != nil {
		g.countUsage(u)
	}
	if hold == nil {
		return
	}
	for i, t := range hold.taken {
		b := hold.budgets[i]
		settled, err := g.s.spending.release(ctx, t, store.Spent{Tokens: totalTokens(u), Nanos: nanosIn(b, u.GetCost())})
		if err != nil {
			// The reservation lapses on its own; what the allowance's
			// calls used goes uncounted by the budget (the ledger has it).
			g.s.log.Warn("counting model calls against their budget", "generation_id", g.id, "budget", b.Name(), "err", err)
			continue
		}
		if settled != nil {
			g.warnBudget(ctx, b, t.a.charge, *settled)
		}
	}
}

// warnBudget emits a BUDGET_WARNING the first time in this run that the
// budget's subject, having spent s, is past its soft threshold.
func (g *generation) warnBudget(ctx context.Context, b *budget.Budget, c store.Charge, s store.Spent) {
	key := c.Budget + "\x00" + c.Subject + "\x00" + c.From.String()
	if !pastThreshold(b, s) || !g.budgetWarned.first(key) {
		return
	}
	msg := fmt.Sprintf("the budget %q%s has used %s of its period; it refuses model calls once it has used all of it",
		b.Name(), subjectWords(b, c.Subject), usedWords(b, s))
	g.s.log.Warn("budget past its soft threshold", "tenant", g.tenant, "budget", b.Name(), "subject", c.Subject,
		"generation_id", g.id, "tokens", s.Tokens, "nanos", s.Nanos)
	g.s.meters.budgetWarned(ctx, g.tenant, b.Name())
	if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Warning{Warning: &agentdv1.Warning{
		Code: "BUDGET_WARNING", Message: msg,
	}}}); err != nil {
		g.s.log.Debug("the budget warning was not sent", "generation_id", g.id, "err", err)
	}
}

// pastThreshold reports whether s is at or past b's soft threshold of
// either limit.
func pastThreshold(b *budget.Budget, s store.Spent) bool {
	tokens, nanos, _ := b.Limits()
	pct := b.WarnPercent()
	return tokens > 0 && s.Tokens*100 >= tokens*pct || nanos > 0 && s.Nanos*100 >= nanos*pct
}

// budgetRefused is the error of a model call that budget b refused: its
// subject had spent s of it in the period of charge c. A pausing budget's
// refusal of a pausable call (a model turn, not a server's sample) is an
// *atBudget, which the loop asks about.
func (g *generation) budgetRefused(ctx context.Context, b *budget.Budget, c store.Charge, s store.Spent, now time.Time, pausable bool) error {
	g.s.meters.budgetRefused(ctx, g.tenant, b.Name())
	reached := budgetReached(b, s)
	g.s.log.Info("budget refused a model call", "tenant", g.tenant, "budget", b.Name(), "subject", c.Subject,
		"generation_id", g.id, "used", reached.GetUsed(), "limit", reached.GetValue(), "unit", reached.GetUnit())
	if b.Pauses() && pausable {
		return &atBudget{reached: reached, msg: "the budget " + b.Name() + " refused the model call"}
	}
	retry, when := b.SpanAt(now).End.Sub(now), "once the period turns"
	if !spentOf(s).reaches(c) {
		// Held, not spent: calls under way reserved what is left.
		retry, when = allowanceIdle, "once the model calls under way give back what they reserved"
	}
	return &fault.Error{
		Kind: fault.Exhausted,
		Msg: fmt.Sprintf("the budget %q%s has used %s of its period; the next model call may run %s, in %s",
			b.Name(), subjectWords(b, c.Subject), usedWords(b, s), when, retry.Round(time.Second)),
		Reason:     "BUDGET_EXHAUSTED",
		Metadata:   map[string]string{"budget": b.Name(), "used": strconv.FormatInt(reached.GetUsed(), 10), "limit": strconv.FormatInt(reached.GetValue(), 10), "unit": reached.GetUnit()},
		RetryDelay: retry,
		Quota:      []fault.QuotaViolation{{Subject: quotaSubject(b, g.tenant, c.Subject), Description: "budget:" + b.Name()}},
	}
}

// budgetReached names the limit of b that s reached (with what calls
// under way reserved): tokens where it limits them and they are taken,
// else money. Used is what was counted, reservations aside.
func budgetReached(b *budget.Budget, s store.Spent) *agentdv1.LimitReached {
	tokens, nanos, currency := b.Limits()
	if tokens > 0 && s.Tokens+s.ReservedTokens >= tokens || nanos == 0 {
		return &agentdv1.LimitReached{Name: "budget:" + b.Name(), Value: tokens, Used: s.Tokens, Unit: "tokens"}
	}
	return &agentdv1.LimitReached{Name: "budget:" + b.Name(), Value: nanos, Used: s.Nanos, Unit: currency}
}

// quotaSubject is whose budget b is, as a QuotaFailure names it.
func quotaSubject(b *budget.Budget, tenant, subject string) string {
	switch b.Spec().GetScope() {
	case agentdv1.BudgetScope_BUDGET_SCOPE_API_KEY:
		return "api_key:" + subject
	case agentdv1.BudgetScope_BUDGET_SCOPE_END_USER:
		return "end_user:" + subject
	}
	return "tenant:" + tenant
}

func subjectWords(b *budget.Budget, subject string) string {
	switch b.Spec().GetScope() {
	case agentdv1.BudgetScope_BUDGET_SCOPE_API_KEY:
		return fmt.Sprintf(" of the API key %q", subject)
	case agentdv1.BudgetScope_BUDGET_SCOPE_END_USER:
		return fmt.Sprintf(" of the end user %q", subject)
	}
	return ""
}

// usedWords says what s is of b's limits, e.g. "1200 of 1000 tokens".
func usedWords(b *budget.Budget, s store.Spent) string {
	tokens, nanos, currency := b.Limits()
	var out string
	if tokens > 0 {
		out = fmt.Sprintf("%d of %d tokens", s.Tokens, tokens)
		if s.ReservedTokens > 0 {
			out += fmt.Sprintf(" (%d more reserved by calls under way)", s.ReservedTokens)
		}
	}
	if nanos > 0 {
		if out != "" {
			out += " and "
		}
		out += fmt.Sprintf("%s of %s %s", decimal(s.Nanos), decimal(nanos), currency)
		if s.ReservedNanos > 0 {
			out += fmt.Sprintf(" (%s more reserved)", decimal(s.ReservedNanos))
		}
	}
	return out
}

// totalTokens is every token u counts: input, output, cache reads and
// writes.
func totalTokens(u *agentdv1.Usage) int64 {
	return u.GetInputTokens() + u.GetOutputTokens() + u.GetCacheReadInputTokens() + u.GetCacheWriteInputTokens()
}

// nanosIn is what c counts against b's money: its amount where b limits
// money in c's currency, else nothing.
func nanosIn(b *budget.Budget, c *agentdv1.Cost) int64 {
	_, nanos, currency := b.Limits()
	if nanos == 0 || c.GetCurrency() != currency {
		return 0
	}
	return c.GetNanos()
}

// sampleCall names a server's sample among a generation's model calls:
// a budget's refusal of one fails the sample, never pauses the
// generation.
const sampleCall = "sample"

// warnedSet holds the budgets (with subject and period) a run warned of.
// Safe for concurrent use: a server's samples settle on goroutines of
// their own.
type warnedSet struct {
	mu   sync.Mutex
	keys map[string]bool
}

// first reports whether key is new, and holds it.
func (w *warnedSet) first(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.keys[key] {
		return false
	}
	if w.keys == nil {
		w.keys = make(map[string]bool)
	}
	w.keys[key] = true
	return true
}

// BudgetsChanged makes the Service read the budgets set through the
// admin API again before its next model call: one set or deleted by this
// replica's AdminService applies here at once.
func (s *Service) BudgetsChanged() {
	if sp := s.spending; sp != nil {
		sp.cacheMu.Lock()
		sp.loadedAt = time.Time{}
		sp.cacheMu.Unlock()
	}
}
