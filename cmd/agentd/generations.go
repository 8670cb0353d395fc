package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

const getUsage = `usage: agentd get ID [flags]

Prints one generation, live or finished (finished ones are kept for
agentd's generation.retention, 24 hours by default): its state, when it
was created, last changed and finished, and how many events it logged.
A paused one also shows what it waits for, until when, and the command
that resumes it; a finished one its usage, and its final message (and
its structured answer, with an output schema) or the error it ended
with. --json prints the Generation message.

examples:
  agentd get gen_0193a5b2c4d6e8f0a1b2c3d4e5f60718
  agentd get gen_0193a5b2c4d6e8f0a1b2c3d4e5f60718 --json
` + clientUsage

// get runs `agentd get`.
func get(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := newFlagSet("agentd get", getUsage)
	c.register(fs)
	id, err := c.parseWithID(fs, "generation", args, getenv, stdout)
	if err != nil {
		return err
	}
	p := c.printing(stdout, stderr)
	return c.call(ctx, func(ctx context.Context, client agentdv1.AgentServiceClient) error {
		res, err := client.GetGeneration(ctx, &agentdv1.GetGenerationRequest{GenerationId: id})
		if err != nil {
			return err
		}
		if p.asJSON {
			p.json(res.GetGeneration())
			return nil
		}
		p.generation(res.GetGeneration())
		return nil
	})
}

// generation prints g for a person, with the command that follows or
// resumes it while it is live.
func (p *printer) generation(g *agentdv1.Generation) {
	p.line("%s %s", g.GetGenerationId(), stateWord(g.GetState()))
	p.line("  created:  %s", localTime(g.GetCreatedAt().AsTime()))
	p.line("  updated:  %s", localTime(g.GetUpdatedAt().AsTime()))
	if g.GetFinishedAt() != nil {
		p.line("  finished: %s", localTime(g.GetFinishedAt().AsTime()))
	}
	p.line("  events:   %d", g.GetLastSequence())
	if u := g.GetUsage(); u != nil {
		p.line("  usage:    %d input, %d output tokens", u.GetInputTokens(), u.GetOutputTokens())
	}
	if g.GetErrorCode() != 0 {
		p.line("  error:    %s: %s", codes.Code(g.GetErrorCode()), g.GetErrorMessage())
	}
	if text := messageText(g.GetMessage()); text != "" {
		p.line("  message:  %s", text)
	}
	if v := g.GetStructured(); v != nil {
		p.line("  answer:   %s", jsonOf(v))
	}
	p.live(g)
}

// live prints what a live generation waits for, and the command to type
// next: the one that resumes a paused generation, or follows a running
// one.
func (p *printer) live(g *agentdv1.Generation) {
	id := g.GetGenerationId()
	switch g.GetState() {
	case agentdv1.GenerationState_GENERATION_STATE_PAUSED:
		w := pending{approvals: g.GetApprovalRequests(), calls: g.GetFunctionCalls()}
		if ids := w.ids(); len(ids) > 0 {
			p.line("  waiting for: %s", strings.Join(ids, ", "))
		}
		if g.GetExpiresAt() != nil {
			p.line("  expires:  %s", localTime(g.GetExpiresAt().AsTime()))
		}
		p.resumeHint(id, w, nil)
	case agentdv1.GenerationState_GENERATION_STATE_RUNNING, agentdv1.GenerationState_GENERATION_STATE_WAITING:
		p.note("follow it: %s", p.next.command("attach", id))
	}
}

// messageText is the text of m's parts.
func messageText(m *agentdv1.Message) string {
	var b strings.Builder
	for _, part := range m.GetParts() {
		b.WriteString(part.GetText())
	}
	return b.String()
}

func stateWord(s agentdv1.GenerationState) string {
	return enumWord(s.String(), "GENERATION_STATE_")
}

const listUsage = `usage: agentd list [flags]

Prints the generations agentd keeps for you (for your tenant), newest
first, one a line: id, state, when it was created and last changed.
--state keeps those in the states given; --limit caps how many are
printed (0: all of them, page after page). --json prints one Generation
message a line.

examples:
  agentd list
  agentd list --state paused,failed --limit 10
  agentd list --json --limit 0
` + clientUsage

// listPageSize is the largest page list asks for: ListGenerations' most.
const listPageSize = 1000

// list runs `agentd list`.
func list(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, stderr io.Writer) error {
	var c clientFlags
	var states statesFlag
	limit := 50
	fs := newFlagSet("agentd list", listUsage)
	c.register(fs)
	fs.Var(&states, "state", "only generations in these `states`: running, waiting, paused, completed, failed, cancelled; comma-separated (repeatable)")
	fs.IntVar(&limit, "limit", limit, "print at most `N` generations; 0: all")
	positional, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(positional) > 0 || limit < 0 {
		return errors.New("agentd list takes flags only, and --limit 0 or more (\"agentd list -h\" shows them)")
	}
	c.fromEnv(fs, getenv)
	p := c.printing(stdout, stderr)
	return c.call(ctx, func(ctx context.Context, client agentdv1.AgentServiceClient) error {
		gens, more, err := listGenerations(ctx, client, states, limit, listPageSize)
		if err != nil {
			return err
		}
		p.generations(gens, more, limit)
		return nil
	})
}

// listGenerations reads the generations in states, page after page of at
// most pageSize, until it has limit of them (0: all); more says whether
// agentd has more.
func listGenerations(ctx context.Context, client agentdv1.AgentServiceClient, states []agentdv1.GenerationState, limit, pageSize int) (gens []*agentdv1.Generation, more bool, err error) {
	req := &agentdv1.ListGenerationsRequest{States: states}
	for {
		req.PageSize = int32(pageSize)
		if limit > 0 {
			req.PageSize = int32(min(pageSize, limit-len(gens)))
		}
		res, err := client.ListGenerations(ctx, req)
		if err != nil {
			return nil, false, err
		}
		gens = append(gens, res.GetGenerations()...)
		req.PageToken = res.GetNextPageToken()
		if req.PageToken == "" || limit > 0 && len(gens) >= limit {
			return gens, req.PageToken != "", nil
		}
	}
}

// generations prints gens, a table for a person, and says when there
// are more than limit.
func (p *printer) generations(gens []*agentdv1.Generation, more bool, limit int) {
	if p.asJSON {
		for _, g := range gens {
			p.json(g)
		}
	} else {
		p.table(gens)
	}
	if more {
		p.note("(the first %d; --limit 0 prints them all)", limit)
	}
}

func (p *printer) table(gens []*agentdv1.Generation) {
	if len(gens) == 0 {
		p.line("no generations")
		return
	}
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tCREATED\tUPDATED")
	for _, g := range gens {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.GetGenerationId(), stateWord(g.GetState()), localTime(g.GetCreatedAt().AsTime()), localTime(g.GetUpdatedAt().AsTime()))
	}
	tw.Flush()
}

// statesFlag collects --state: generation states by their names.
type statesFlag []agentdv1.GenerationState

func (s *statesFlag) String() string { return "" }

func (s *statesFlag) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		name = strings.ToUpper(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		st, ok := agentdv1.GenerationState_value["GENERATION_STATE_"+strings.TrimPrefix(name, "GENERATION_STATE_")]
		if !ok || st == 0 {
			return errors.New("want running, waiting, paused, completed, failed or cancelled")
		}
		*s = append(*s, agentdv1.GenerationState(st))
	}
	return nil
}
