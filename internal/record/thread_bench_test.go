package record_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/sealer/sealertest"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// benchStore opens a store of driver for a benchmark (PostgreSQL is
// skipped without a server: `make bench-threads` provides one).
func benchStore(b *testing.B, driver string) store.Store {
	b.Helper()
	var st store.Store
	var err error
	if driver == "postgres" {
		st, err = store.OpenPostgres(b.Context(), pgtest.DSN(b), 0)
	} else {
		st, err = store.OpenSQLite(filepath.Join(b.TempDir(), "agentd.db"), 0)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// threadOf records a thread of n items, each a message of size bytes of
// text, sealed as agentd seals them, alternately the user's and the
// assistant's.
func threadOf(b *testing.B, st store.Store, n, size int) string {
	b.Helper()
	key := sealertest.Keyring(b, 1)
	msgs := make([]*agentdv1.Message, n)
	for i := range msgs {
		role := agentdv1.Role_ROLE_USER
		if i%2 == 1 {
			role = agentdv1.Role_ROLE_ASSISTANT
		}
		msgs[i] = &agentdv1.Message{Role: role, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: strings.Repeat("x", size)}}}}
	}
	now := time.Now()
	t, err := st.Threads().CreateThread(b.Context(), store.NewThread{Tenant: "t", ID: fmt.Sprintf("thr_%d", n), Now: now,
		Items: record.ThreadItems(key, "t", "", msgs, now)})
	if err != nil {
		b.Fatal(err)
	}
	return t.ID
}

// BenchmarkThreadLoad measures what starting a generation on a thread of
// 1,000 items of 2 KiB each spends on the thread (target: at most 10 ms):
// its items read, unsealed and decoded into the conversation, on SQLite
// and on PostgreSQL.
func BenchmarkThreadLoad(b *testing.B) {
	for _, driver := range []string{"sqlite", "postgres"} {
		b.Run(driver, func(b *testing.B) {
			st := benchStore(b, driver)
			const n = 1000
			id := threadOf(b, st, n, 2<<10)
			key := sealertest.Keyring(b, 1)
			for b.Loop() {
				msgs, err := record.ThreadMessages(b.Context(), st.Threads(), key, "t", id, n)
				if err != nil || len(msgs) != n {
					b.Fatalf("loaded %d messages, %v; want %d", len(msgs), err, n)
				}
			}
		})
	}
}

// BenchmarkTurnOnThread measures one tool turn of a generation on a
// thread of 10, 100 and 1,000 items (2 KiB each), as its journal records
// it: the model's message with a tool call, the call's result, and the
// checkpoints at the turn's boundaries, written and awaited. The
// generation's record holds its own messages only, so the figures should
// not grow with the thread.
func BenchmarkTurnOnThread(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			st := benchStore(b, "sqlite")
			id := threadOf(b, st, n, 2<<10)
			prefix, err := record.ThreadMessages(b.Context(), st.Threads(), sealertest.Keyring(b, 1), "t", id, int64(n))
			if err != nil {
				b.Fatal(err)
			}
			s := &scripted{t: b, msgs: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "go"}}}}}}
			o := record.Options{Store: st.Generations(), Tenant: "t", ID: "gen_1", Owner: "replica-1", TTL: time.Minute,
				Stop:   func(err error) { b.Errorf("the generation is stopped: %v", err) },
				Warn:   func(msg string, err error) { b.Errorf("%s: %v", msg, err) },
				Thread: &store.ThreadStart{ID: id},
			}
			j, created, err := record.Create(b.Context(), o, s.checkpoint(nil))
			if err != nil || created.ThreadBase != int64(n) {
				b.Fatalf("created %+v, %v; want the thread's %d items as its base", created, err, n)
			}
			s.j = j
			j.SetThreadBase(created.ThreadBase)
			s.msgs = append(prefix, s.msgs...)
			for b.Loop() {
				s.turn("calling echo", `{"text":"hello"}`, "hello", false)
				if err := s.j.Await(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			s.j.Settle(b.Context(), store.Completed, record.EncodeResult(nil, nil, nil))
		})
	}
}
