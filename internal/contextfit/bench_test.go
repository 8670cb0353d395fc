package contextfit_test

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"strconv"
	"testing"

	"github.com/agentd/agentd/internal/contextfit"
)

// BenchmarkFit fits a thread of 1,000 messages (250 turns: a question, a
// tool call, its 2,000-byte result, an answer; 169,250 tokens) to budgets
// that it fits whole (the estimate alone), that eliding the oldest results
// meets, and that only leaving out most of its turns meets.
func BenchmarkFit(b *testing.B) {
	var msgs []*agentdv1.Message
	for i := range 250 {
		id := "c" + strconv.Itoa(i)
		msgs = append(msgs, user(200), calls(id), results(result(id, text(2000))), answer(500))
	}
	for _, bb := range []struct {
		name   string
		budget int64
	}{
		{"whole", 1 << 20},
		{"elide", 100_000},
		{"drop", 10_000},
	} {
		b.Run(bb.name, func(b *testing.B) {
			d := contextfit.Dropper{Budget: bb.budget}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := d.Fit(b.Context(), msgs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
