package app_test

import (
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
)

// attachAll attaches to generation id after sequence after and returns
// the sequence numbers and kinds of the events it sends until it ends.
func attachAll(t *testing.T, client agentdv1.AgentServiceClient, id string, after int64) (seqs []int64, kinds []string) {
	t.Helper()
	stream, err := client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Attach{Attach: &agentdv1.AttachGeneration{GenerationId: id, AfterSequence: after}}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return seqs, kinds
		}
		if err != nil {
			t.Fatalf("attach: %v", err)
		}
		seqs = append(seqs, ev.GetSequence())
		kinds = append(kinds, string(ev.ProtoReflect().WhichOneof(ev.ProtoReflect().Descriptor().Oneofs().ByName("event")).Name()))
	}
}

// X-G2: on both stores, two agentd replicas: a generation paused on one
// is followed from its log on the other (every event, numbered from 1,
// ending with paused), resumed there, and its resumed part followed back
// on the first, numbered on from the pause's.
func TestAttachAcrossReplicas(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{config.StoreSQLite, config.StorePostgres} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			counter := filepath.Join(t.TempDir(), "calls")
			clients := twoReplicas(t, driver, counter)
			agent := deleteAgent(t)
			paused := startAndPause(t, clients[0], agent)
			id := paused.GetGenerationId()

			seqs, kinds := attachAll(t, clients[1], id, 0)
			n := int64(len(seqs))
			if n == 0 || kinds[n-1] != "paused" || kinds[0] != "started" {
				t.Fatalf("attached to the paused generation: %v; want started ... paused", kinds)
			}
			for i, s := range seqs {
				if s != int64(i+1) {
					t.Fatalf("sequences %v; want 1..%d", seqs, n)
				}
			}
			if final := resume(t, clients[1], paused, agent, true); final != "deleted draft.txt" {
				t.Fatalf("the resume ended with %q", final)
			}
			seqs, kinds = attachAll(t, clients[0], id, n)
			if len(seqs) == 0 || seqs[0] != n+1 || kinds[0] != "started" || kinds[len(kinds)-1] != "completed" {
				t.Fatalf("attached after %d to the resumed generation: %v %v; want started (%d) ... completed", n, seqs, kinds, n+1)
			}
			for i, s := range seqs {
				if s != n+1+int64(i) {
					t.Fatalf("sequences %v; want them from %d without gaps", seqs, n+1)
				}
			}
			if got := lines(t, counter); !cmp.Equal(len(got), 1) {
				t.Errorf("the MCP server saw %d calls; want 1", len(got))
			}
		})
	}
}
