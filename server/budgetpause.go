package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// budgetLimitPrefix begins the name of a budget reached
// (LimitReached.name), as its approval shows it.
const budgetLimitPrefix = "budget:"

// isBudget reports whether lr is a budget's rather than one of the
// generation's own limits.
func isBudget(lr *agentdv1.LimitReached) bool {
	return strings.HasPrefix(lr.GetName(), budgetLimitPrefix)
}

// atBudget is the refusal of a model call by a budget whose action is
// PAUSE: the generation asks whoever may decide to go on, as at one of
// its own limits with on_limit PAUSE.
type atBudget struct {
	reached *agentdv1.LimitReached
	msg     string
}

func (e *atBudget) Error() string { return e.msg }

// budgetedTurn runs model turn `turn` once the budgets allow it: while a
// pausing budget refuses the call, the generation asks for an approval
// (on its stream, else by pausing); an approval asks the budgets again, a
// refusal completes the generation at the budget. done says the
// generation ended, with err.
func (g *generation) budgetedTurn(ctx context.Context, turn int) (r *reply, done bool, err error) {
	for {
		r, err := g.modelTurn(ctx, turn)
		var at *atBudget
		if !errors.As(err, &at) {
			return r, err != nil, err
		}
		if goOn, err := g.askBudget(ctx, at.reached); !goOn {
			return nil, true, err
		}
		// The wait for the approval may have taken the generation past
		// its own limits.
		if done, err := g.checkLimits(ctx, modelCallLimits, nil); done {
			return nil, true, err
		}
	}
}

// askBudget asks whoever may decide whether the generation goes on past
// the budget it reached at lr, once the budget allows: goOn says it was
// approved; otherwise the generation ended (declined: completed at the
// budget) or paused, with err.
func (g *generation) askBudget(ctx context.Context, lr *agentdv1.LimitReached) (goOn bool, err error) {
	answer, err := g.askAtLimit(ctx, lr, fmt.Sprintf("The generation reached its %s (%s). Go on once it allows?", lr.GetName(), figures(lr, 0)), nil)
	if answer == nil {
		return false, err
	}
	return g.budgetDecided(ctx, lr, answer)
}

// budgetDecided applies d, the decision of the approval of the budget
// reached at lr: an approval goes on (the budget is asked again before
// the model call), a refusal completes the generation at the budget.
func (g *generation) budgetDecided(ctx context.Context, lr *agentdv1.LimitReached, d *decision) (goOn bool, err error) {
	a := d.approval
	g.answered.add(d.requestID)
	g.s.log.InfoContext(ctx, "budget approval decided", "audit", true, "principal", d.by, "tenant", g.tenant, "generation", g.id,
		"request", d.requestID, "limit", lr.GetName(), "approved", a.GetApproved(), "reason", a.GetReason())
	if !a.GetApproved() {
		return false, g.endAtLimit(ctx, lr, g.lastReply())
	}
	return true, nil
}

// resumeAtBudget continues a generation resumed at the budget its paused
// turn t waits for the approval of: approved, it goes on to its model
// call, which asks the budget again; declined, it completes there. done
// says the generation ended, with err.
func (g *generation) resumeAtBudget(ctx context.Context, t *statev1.PausedTurn, d *decision) (done bool, err error) {
	if goOn, err := g.budgetDecided(ctx, t.GetLimit().GetLimit(), d); !goOn {
		return true, err
	}
	if err := g.progress(ctx); err != nil {
		return true, err
	}
	g.clearPaused()
	return false, g.awaitCheckpoint(ctx)
}
