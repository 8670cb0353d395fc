package record_test

import (
	"testing"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
)

// X-G3: the checkpoint that holds a generation's final answer is written
// with its end and never before: the events recorded before it are stored
// as usual, but no record holds the final answer without the completed
// event, which would make the replica adopting it (had this one died
// between the two writes) ask the model again, past the answer.
func TestFinalAnswerGoesWithTheEnd(t *testing.T) {
	t.Parallel()
	gens := newStore(t).Generations()
	j := newJournal(t, gens, nil, "gen_1")
	j.Record(text("ok"))
	user := &agentdv1.Message{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}}}
	answer := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "ok"}}}}
	j.Record(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Usage{Usage: &agentdv1.Usage{InputTokens: 1}}})
	j.Final(&statev1.Checkpoint{Version: record.Version, GenerationId: "gen_1", Messages: []*agentdv1.Message{user, answer}, Added: []*agentdv1.Message{answer}})
	if err := j.Await(t.Context()); err != nil { // every event recorded so far stored
		t.Fatal(err)
	}
	items, err := gens.Items(t.Context(), "t", "gen_1", -1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 0 {
		t.Fatalf("before the end the record holds %d items of the conversation; want none: the final answer goes with the end", len(items))
	}
	j.Settle(t.Context(), store.Completed, record.EncodeResult(answer, nil, nil))
	if items, err = gens.Items(t.Context(), "t", "gen_1", -1, 10); err != nil || len(items) != 2 {
		t.Errorf("after the end the record holds %d items (%v); want the conversation's two", len(items), err)
	}
}
