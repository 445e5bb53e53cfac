package machine

// This file is checkpoint mode: a round split at the model's replies, so
// a caller can save them before any tool runs.

import (
	"context"
	"time"

	"github.com/markov-agents/markov/llm"
)

// SetCheckpoints turns checkpoint mode on or off for the machine's next
// runs. In checkpoint mode every round first gets the model's reply of
// each active leaf, records it on the tree (instance.Instance.Reply) and
// yields a Replied step, before any tool runs; the next round runs the
// tools from the recorded replies. A caller that saves every step (a
// durable runner) thus has each reply saved before its tools run: after a
// crash, a machine restored from that save continues the replies — with
// or without checkpoint mode — with no second model call and the same
// tool-use IDs, so every tool's idempotency key is the same as before
// (node.ToolContext.IdempotencyKey). Off by default: a round is then one
// step, as before.
func (m *Machine) SetCheckpoints(on bool) { m.checkpoints = on }

// SetExpiry turns the machine's own judging of deadlines on (the default)
// or off. Off, Run and Apply neither expire a suspension whose deadline
// has passed on the charter's clock nor refuse a result or a signal for
// one: only Expire, at the time it is given, expires suspensions. An
// acceptor that judges deadlines itself, on one clock, turns it off: in
// package durable/fleet an input accepted before the deadline on the
// database's clock is applied whenever its run comes, and the deadline
// expires only a call with no accepted input.
func (m *Machine) SetExpiry(on bool) { m.noExpiry = !on }

// deadlineClock is the time a run judges deadlines at: the charter's
// clock, or the zero time (no deadline passed) with expiry off.
func (m *Machine) deadlineClock() time.Time {
	if m.noExpiry {
		return time.Time{}
	}
	return m.charter.now()
}

// replies runs the first half of a checkpointed round: every active leaf
// with no recorded reply gets one from the model (ReplyOnly), recorded on
// the tree, and a Replied step reports them (their usage; Root holds
// them). It reports whether the run ended: the caller stopped, or an
// error. With every reply already recorded it does nothing.
func (m *Machine) replies(ctx context.Context, emit func(Step) bool) (ended bool, err error) {
	reqs, err := m.stepRequests()
	if err != nil {
		return true, err
	}
	ask := reqs[:0]
	for _, r := range reqs {
		if r.Reply == nil {
			r.ReplyOnly = true
			ask = append(ask, r)
		}
	}
	if len(ask) == 0 {
		return false, nil
	}
	results, err := m.stepLeaves(ctx, ask)
	if cerr := ctx.Err(); cerr != nil {
		return true, cerr
	}
	if err != nil {
		return true, err
	}
	var usage llm.Usage
	for i, r := range results {
		recordReply(ask[i].Instance, r.Reply)
		usage = usage.Add(r.Reply.Usage)
	}
	return !emit(Step{Reason: Replied, Usage: usage}), nil
}
