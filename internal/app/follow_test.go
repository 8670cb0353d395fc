package app_test

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
)

// followAll follows generation id after sequence after with
// FollowGeneration and returns the events it sends until it ends.
func followAll(t *testing.T, client agentdv1.AgentServiceClient, id string, after int64) []*agentdv1.GenerateResponse {
	t.Helper()
	stream, err := client.FollowGeneration(t.Context(), &agentdv1.FollowGenerationRequest{GenerationId: id, AfterSequence: after})
	if err != nil {
		t.Fatal(err)
	}
	var events []*agentdv1.GenerateResponse
	for {
		res, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return events
		}
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
		events = append(events, res.GetEvent())
	}
}

// twoReplicas serves two agentd replicas on one store of driver's (one
// SQLite file, or one PostgreSQL database), whose registered server
// "files" is the counting MCP server writing to counter.
func twoReplicas(t *testing.T, driver, counter string) [2]agentdv1.AgentServiceClient {
	t.Helper()
	dir, dsn := t.TempDir(), "postgres://unused/"
	if driver == config.StorePostgres {
		dsn = storeDSN(t)
	}
	var clients [2]agentdv1.AgentServiceClient
	for i := range clients {
		cfg := counterConfig(t, dsn, counter)
		if driver == config.StoreSQLite { // one file, shared
			cfg.Store.Driver, cfg.Store.DSN, cfg.StateDir = config.StoreSQLite, "", dir
		}
		conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
		clients[i] = agentdv1.NewAgentServiceClient(conn)
	}
	return clients
}

// On both stores, two agentd replicas: a generation created on one
// (CreateGeneration, detached: it pauses at its approval) is followed on
// the other, every event numbered from 1 and ending with paused; resumed
// there, its resumed part is followed back on the first, numbered on from
// the pause's, to completed.
func TestFollowAcrossReplicas(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{config.StoreSQLite, config.StorePostgres} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			counter := filepath.Join(t.TempDir(), "calls")
			clients := twoReplicas(t, driver, counter)
			agent := deleteAgent(t)
			res, err := clients[0].CreateGeneration(t.Context(), &agentdv1.CreateGenerationRequest{Start: &agentdv1.StartGeneration{
				Agent: agent, Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "tidy up"}}}}},
			}})
			if err != nil {
				t.Fatalf("CreateGeneration: %v", err)
			}
			id := res.GetGenerationId()

			first := followAll(t, clients[1], id, res.GetFirstSequence()-1)
			n := int64(len(first))
			if n == 0 || first[0].GetStarted().GetGenerationId() != id || first[n-1].GetPaused() == nil {
				t.Fatalf("followed the created generation on the other replica: %v; want started ... paused", first)
			}
			for i, ev := range first {
				if ev.GetSequence() != int64(i+1) {
					t.Fatalf("event %d has sequence %d; want 1..%d without gaps", i, ev.GetSequence(), n)
				}
			}
			if final := resume(t, clients[1], first[n-1].GetPaused(), agent, true); final != "deleted draft.txt" {
				t.Fatalf("the resume ended with %q", final)
			}
			rest := followAll(t, clients[0], id, n)
			if len(rest) == 0 || rest[0].GetStarted() == nil || rest[len(rest)-1].GetCompleted() == nil {
				t.Fatalf("followed the resumed generation after %d: %v; want started ... completed", n, rest)
			}
			for i, ev := range rest {
				if want := n + 1 + int64(i); ev.GetSequence() != want {
					t.Fatalf("event %d after the resume has sequence %d; want %d", i, ev.GetSequence(), want)
				}
			}
			if got := lines(t, counter); len(got) != 1 {
				t.Errorf("the MCP server saw %d calls; want 1", len(got))
			}
		})
	}
}
