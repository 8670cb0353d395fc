// Package contextfit fits a conversation to a model's context window
// before a model turn, by the agent's context policy (Agent.context): it
// owns the estimate of a conversation's tokens, agentd's table of the
// known models' windows, and the policies that leave part of a
// conversation out. The conversation it is given is never changed: what
// it sends shares the messages it keeps whole and copies those it alters.
//
// One policy exists, Dropper: it replaces the oldest tool results'
// outputs by a short note, then leaves the oldest turns out whole. A
// policy that summarises what it leaves out would be another Fitter.
package contextfit

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
)

// Fitter fits a conversation to a budget of input tokens.
type Fitter interface {
	// Fit returns what of msgs to send and what was left out: nil, with
	// msgs itself, when all of it is sent. msgs and its messages are
	// never changed. Fit may be called concurrently and repeated; a
	// policy that does I/O (a summariser) returns ctx's error when ctx
	// ends first.
	Fit(ctx context.Context, msgs []*agentdv1.Message) ([]*agentdv1.Message, *agentdv1.ContextTrim, error)
}

// DefaultReserveOutputTokens is what a budget taken from a model's window
// keeps free for the answer when the policy does not say
// (ContextPolicy.reserve_output_tokens 0).
const DefaultReserveOutputTokens = 4096

// New returns the Fitter that policy asks for, for model as provider
// serves it. fixedBytes is the size of what every request sends besides
// the conversation (the instructions, the tools' schemas): it shares a
// model's window with the conversation, so a budget taken from the window
// leaves room for it; a policy's max_input_tokens is the conversation's
// alone. Nil when policy is nil, or when its budget would be the window of
// a model the table does not know: the whole conversation is then sent.
func New(policy *agentdv1.ContextPolicy, provider, model string, fixedBytes int64) Fitter {
	if policy == nil {
		return nil
	}
	budget := policy.GetMaxInputTokens()
	if budget == 0 {
		w, ok := Lookup(provider, model)
		if !ok {
			return nil
		}
		budget = w.Budget(policy.GetReserveOutputTokens()) - Tokens(fixedBytes)
	}
	return Dropper{Budget: max(budget, 0), KeepFirst: policy.GetKeepFirst(), KeepToolResults: policy.GetKeepToolResults()}
}
