package record

import (
	"path/filepath"
	"testing"
	"time"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/store"
)

// X-G3: once the final answer is taken (Final), no write before the end
// takes the events recorded after it: the completed event names the
// answer's items, which only the end's write stores. A write due between
// the two (the flush timer, a poke) takes the events before it alone.
func TestEventsAfterTheFinalAnswerWaitForTheEnd(t *testing.T) {
	t.Parallel()
	st, err := store.OpenSQLite(filepath.Join(t.TempDir(), "agentd.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o := Options{Store: st.Generations(), Tenant: "t", ID: "gen_1", Owner: "replica-1", TTL: time.Minute,
		Stop: func(err error) { t.Errorf("stopped: %v", err) }, Warn: func(msg string, err error) { t.Errorf("%s: %v", msg, err) }}
	j, _, err := Create(t.Context(), o, &statev1.Checkpoint{Version: Version, GenerationId: "gen_1"})
	if err != nil {
		t.Fatal(err)
	}
	text := &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: "ok"}}}
	answer := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "ok"}}}}
	j.Record(text)
	j.Final(&statev1.Checkpoint{Version: Version, GenerationId: "gen_1", Messages: []*agentdv1.Message{answer}, Added: []*agentdv1.Message{answer}})
	j.Record(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{
		GenerationId: "gen_1", Message: answer, Messages: []*agentdv1.Message{answer}}}})
	d, err := j.due()
	if err != nil {
		t.Fatal(err)
	}
	if len(d.batch) != 1 || d.batch[0].Kind != "text_delta" {
		t.Errorf("a write due after the final answer takes %d events %v; want the text alone", len(d.batch), d.batch)
	}
	j.Settle(t.Context(), store.Completed, EncodeResult(answer, nil, nil))
	items, err := st.Generations().Items(t.Context(), "t", "gen_1", -1, 10)
	if err != nil || len(items) != 1 {
		t.Errorf("after the end the record holds %d items (%v); want the answer's", len(items), err)
	}
}
