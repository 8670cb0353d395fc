package server

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/store"
)

// ledgerEvery is how often a replica writes what its model calls used to
// the usage ledger: a replica that dies loses at most this much of it
// from the ledger (budgets count through their allowances, apart).
const ledgerEvery = time.Second

// ledgerKey is a row of the usage ledger: whose calls, in which hour,
// priced in which currency.
type ledgerKey struct {
	tenant, apiKey, endUser, currency string
	hour                              time.Time
}

// ledger gathers model calls' usage between writes. Safe for concurrent
// use.
type ledger struct {
	mu   sync.Mutex
	rows map[ledgerKey]*store.UsageEntry
}

// add counts a model call that used u.
func (l *ledger) add(tenant, apiKey, endUser string, at time.Time, u *agentdv1.Usage) {
	k := ledgerKey{tenant: tenant, apiKey: apiKey, endUser: endUser, currency: u.GetCost().GetCurrency(), hour: at.UTC().Truncate(time.Hour)}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.rows[k]
	if e == nil {
		e = &store.UsageEntry{Tenant: tenant, APIKey: apiKey, EndUser: endUser, Currency: k.currency, Hour: k.hour}
		l.rows[k] = e
	}
	e.Calls++
	e.Input += u.GetInputTokens()
	e.Output += u.GetOutputTokens()
	e.CacheRead += u.GetCacheReadInputTokens()
	e.CacheWrite += u.GetCacheWriteInputTokens()
	e.Nanos += u.GetCost().GetNanos()
	if u.GetCost() == nil || u.GetCost().GetUnknown() {
		e.Unpriced++
	}
}

// take returns the rows gathered since the last take, and forgets them.
func (l *ledger) take() []store.UsageEntry {
	l.mu.Lock()
	rows := l.rows
	l.rows = make(map[ledgerKey]*store.UsageEntry, len(rows))
	l.mu.Unlock()
	out := make([]store.UsageEntry, 0, len(rows))
	for _, k := range slices.SortedFunc(maps.Keys(rows), func(a, b ledgerKey) int { return a.hour.Compare(b.hour) }) {
		out = append(out, *rows[k])
	}
	return out
}

// countUsage adds a model call's usage, u, to the ledger.
func (g *generation) countUsage(u *agentdv1.Usage) {
	if sp := g.s.spending; sp != nil {
		sp.ledger.add(g.tenant, g.startedBy, g.endUser, sp.now(), u)
	}
}

// flushLedger writes what the ledger gathered; rows that could not be
// written are lost, and logged.
func (s *Service) flushLedger(ctx context.Context) {
	rows := s.spending.ledger.take()
	if len(rows) == 0 {
		return
	}
	ctx, cancel := store.WriteContext(ctx)
	defer cancel()
	if err := s.spending.store.AddUsage(ctx, rows); err != nil {
		s.log.Warn("writing the usage ledger", "rows", len(rows), "err", err)
	}
}

// ledgerRetention is how long the usage ledger and the budgets' counters
// keep an hour: a year and a month, for a year's reports.
const ledgerRetention = 397 * 24 * time.Hour

// StartLedger starts writing, every ledgerEvery until Close, what this
// replica's model calls used to the usage ledger, and once more at
// Close; giving back, as often, the budgets' allowances nobody spends
// from (all of them at Close); and removing, every hour, the ledger's
// and the budgets' hours older than ledgerRetention. A no-op without
// Options.Budgets.
func (s *Service) StartLedger() {
	if s.spending == nil {
		return
	}
	s.ledgerOn.Store(true)
	s.every(time.Hour, s.sweepSpending)
	s.goBackground(func() {
		t := time.NewTicker(ledgerEvery)
		defer t.Stop()
		for {
			select {
			case <-s.bg.Done():
				return // Close writes what is left, once every generation ended
			case <-t.C:
				s.flushLedger(s.bg)
				s.giveBack(s.bg, false)
			}
		}
	})
}

// sweepSpending removes the hours of the ledger and of the budgets'
// counters older than ledgerRetention, and the reservations that lapsed
// before it.
func (s *Service) sweepSpending() {
	ctx, cancel := context.WithTimeout(s.bg, store.Timeout)
	defer cancel()
	if n, err := s.spending.store.SweepSpending(ctx, s.spending.now().Add(-ledgerRetention)); err != nil {
		if s.bg.Err() == nil {
			s.log.Warn("sweeping the usage ledger", "err", err)
		}
	} else if n > 0 {
		s.log.Debug("swept the usage ledger", "rows", n)
	}
}

// giveBack gives back the budgets' allowances idle for allowanceIdle (all
// of them with all), logging what fails.
func (s *Service) giveBack(ctx context.Context, all bool) {
	if err := s.spending.giveBack(ctx, all); err != nil && s.bg.Err() == nil {
		s.log.Warn("giving back budget allowances", "err", err)
	}
}

// closeLedger writes what the ledger gathered and gives back every
// budget allowance, once the generations this Service owned have ended:
// the last step of Close.
func (s *Service) closeLedger() {
	if s.spending == nil || !s.ledgerOn.Load() {
		return
	}
	ctx := context.WithoutCancel(s.bg)
	s.flushLedger(ctx)
	if err := s.spending.giveBack(ctx, true); err != nil {
		s.log.Warn("giving back budget allowances as agentd stops", "err", err)
	}
}
