package record_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// BenchmarkAdoptionRebuild measures what a replica that adopts a long
// generation spends reading its record and rebuilding it (target: at most
// 200 ms for 160 tool turns): the record of a generation of 160 tool
// turns, each calling echo with an 8 KiB text whose result echoes it, is
// written as a generation's journal writes it, on SQLite and on
// PostgreSQL (skipped without a server: `make bench-record` provides
// one); each operation is what adoption does before the generation runs
// again: the record read (Get), its checkpoint decoded, the conversation
// rebuilt from its items and log (Restore), and what the log says since
// the checkpoint (ReadSince).
func BenchmarkAdoptionRebuild(b *testing.B) {
	for _, driver := range []string{"sqlite", "postgres"} {
		b.Run(driver, func(b *testing.B) {
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
			gens := st.Generations()
			s := newScripted(b, gens)
			const turns, k = 160, 8 << 10
			for i := range turns {
				s.turn(fmt.Sprintf("turn %d: calling echo", i), fmt.Sprintf(`{"text":%q}`, strings.Repeat("x", k)), "Echo: "+strings.Repeat("x", k), false)
			}
			if err := s.j.Await(b.Context()); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				rec, err := gens.Get(b.Context(), "t", "gen_1")
				if err != nil {
					b.Fatal(err)
				}
				cp, err := record.DecodeRunning(rec.Checkpoint, "gen_1")
				if err != nil {
					b.Fatal(err)
				}
				if err := record.Restore(b.Context(), gens, rec, cp, nil); err != nil {
					b.Fatal(err)
				}
				if len(cp.GetMessages()) != 2*turns+1 {
					b.Fatalf("rebuilt %d messages; want %d", len(cp.GetMessages()), 2*turns+1)
				}
				if _, err := record.ReadSince(b.Context(), gens, rec, cp); err != nil {
					b.Fatal(err)
				}
			}
			s.j.Settle(b.Context(), store.Completed, record.EncodeResult(nil, nil, nil))
		})
	}
}
