package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store"
)

// What asking after the replicas' liveness adds to the adopter's round,
// on each store: one Adopt with nothing to adopt, among 1,000 running
// generations of four live replicas, by an adopter that does not attend
// (leases only: the round as it was) and by one that does (it also reads
// the replicas and tries their locks).
//
//	go test -run '^$' -bench AdoptRound ./internal/store/
//	scripts/postgres.sh run go test -run '^$' -bench AdoptRound ./internal/store/
func BenchmarkAdoptRound(b *testing.B) {
	for _, st := range benchStores {
		for _, attending := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/attending=%v", st.name, attending), func(b *testing.B) {
				g := liveReplicas(b, st.open(b))
				if attending {
					attendUntilEnd(b, g, "adopter")
				}
				ctx := b.Context()
				for b.Loop() {
					now := time.Now()
					if got, err := g.Adopt(ctx, "adopter", now, now.Add(15*time.Second), 8); err != nil || len(got) != 0 {
						b.Fatalf("Adopt: %d adopted, %v", len(got), err)
					}
				}
			})
		}
	}
}

// liveReplicas gives s four attending replicas, each running 250
// generations leased for a day, and returns its Generations. All of it
// ends with b.
func liveReplicas(b *testing.B, s store.Store) store.Generations {
	b.Helper()
	b.Cleanup(func() { _ = s.Close() })
	g := s.Generations()
	now := time.Now()
	for r := range 4 {
		owner := fmt.Sprintf("replica-%d", r)
		attendUntilEnd(b, g, owner)
		for i := range 250 {
			if _, err := g.Create(b.Context(), store.NewGeneration{Tenant: "acme", ID: fmt.Sprintf("%s-%d", owner, i), Owner: owner,
				Expires: now.Add(24 * time.Hour), Checkpoint: []byte("c"), Now: now}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return g
}

func attendUntilEnd(b *testing.B, g store.Generations, owner string) {
	b.Helper()
	a, err := g.Attend(b.Context(), owner)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
}
