package config

import "time"

// MaxToolTurnsLimit caps a tool-turn budget: generation.max_tool_turns
// here, and a request's agent.max_tool_turns.
const MaxToolTurnsLimit = 1000

// Generation configures the tool loop.
type Generation struct {
	// MaxToolTurns is the tool-turn budget of a generation whose agent
	// sets none, at most 1000.
	MaxToolTurns int `yaml:"max_tool_turns"`
	// AnswerTimeout is how long a generation waits on its stream for
	// approval decisions and function results before pausing, when the
	// request sets no answer_timeout.
	AnswerTimeout time.Duration `yaml:"answer_timeout"`
	// MaxAnswerTimeout caps a request's answer_timeout.
	MaxAnswerTimeout time.Duration `yaml:"max_answer_timeout"`
	// PauseTTL is how long a paused generation can be resumed; one not
	// resumed by then ends as cancelled.
	PauseTTL time.Duration `yaml:"pause_ttl"`
	// ResumeStaleAfter is how long a resume may hold a paused generation
	// before another resume may take it over (the first is presumed dead;
	// the calls it approved are reported as of unknown outcome, never run
	// twice).
	ResumeStaleAfter time.Duration `yaml:"resume_stale_after"`
	// LeaseTTL is how long the lease of a running generation's owner
	// lasts unless renewed, at least 1s: the owner renews it every third
	// of it, and another replica may take the generation over once it
	// lapses.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// AdoptInterval is how often each replica looks for running
	// generations whose owner died (the store saw its liveness end, or its
	// lease lapsed) or let them go, and adopts them.
	AdoptInterval time.Duration `yaml:"adopt_interval"`
	// Retention is how long a finished generation's record (its state,
	// result and event log) is kept for GetGeneration, ListGenerations and
	// attach.
	Retention time.Duration `yaml:"retention"`
}

// Threads configures the conversations agentd remembers.
type Threads struct {
	// Retention is how long a thread is kept after its last change (an
	// append, an update) when it has no expires_at of its own; 0 keeps
	// threads until they are deleted.
	Retention time.Duration `yaml:"retention"`
}

// validate checks the tool loop's settings.
func (g Generation) validate(bad func(string, ...any)) {
	if g.MaxToolTurns < 1 || g.MaxToolTurns > MaxToolTurnsLimit {
		bad("generation.max_tool_turns: must be 1..%d, got %d", MaxToolTurnsLimit, g.MaxToolTurns)
	}
	if g.AnswerTimeout < 0 {
		bad("generation.answer_timeout: must not be negative, got %s", g.AnswerTimeout)
	}
	if g.LeaseTTL < time.Second {
		bad("generation.lease_ttl: must be at least 1s, got %s", g.LeaseTTL)
	}
	positive(bad, "generation.pause_ttl", g.PauseTTL)
	positive(bad, "generation.resume_stale_after", g.ResumeStaleAfter)
	positive(bad, "generation.adopt_interval", g.AdoptInterval)
	positive(bad, "generation.retention", g.Retention)
	positive(bad, "generation.max_answer_timeout", g.MaxAnswerTimeout)
	if g.MaxAnswerTimeout > 0 && g.AnswerTimeout > g.MaxAnswerTimeout {
		bad("generation.answer_timeout: %s exceeds generation.max_answer_timeout %s", g.AnswerTimeout, g.MaxAnswerTimeout)
	}
}
