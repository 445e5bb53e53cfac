package durabletest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/machine"
)

// A problem names the crash point and what the crash broke there: here a
// tool that mails outside the journal mailed again when its process died
// after mailing and before its round was saved.
func ExampleProblem() {
	p := durabletest.Problem{
		Point: durabletest.Point{Kind: durabletest.BeforeSave, N: 3},
		What:  "effect mail ran 2 times, 1 in the uncrashed run",
	}
	fmt.Println(p)
	// Output: at before-save 3: effect mail ran 2 times, 1 in the uncrashed run
}

// A conversation of turns: a message, a manager's decision on the pending
// call of a tool, a command, and two days passing — the clock moved, then
// the sweeper run, which expires what is due. Each turn names itself in
// the kit's errors.
func ExampleTurn() {
	turns := []durabletest.Turn{
		durabletest.Say("I spent $30 on a lunch"),
		durabletest.Resume("request_approval", map[string]any{"approved": true}),
		durabletest.Invoke(command.Invoke("withdraw", map[string]string{"expense_id": "e1"})),
		durabletest.Advance(48 * time.Hour),
	}
	for _, t := range turns {
		fmt.Println(t)
	}
	// Output:
	// say "I spent $30 on a lunch"
	// resume request_approval
	// invoke withdraw
	// advance 48h0m0s
}

// A turn of the test's own: a manager's decision sent the way the
// service receives it (here straight to the runner; over signed HTTP in
// examples/approvalservice), on the pending call PendingCall finds.
func ExampleDo() {
	approve := durabletest.Do("approve by webhook", func(ctx context.Context, r *durable.Runner, _ durabletest.Env) error {
		c, err := durabletest.PendingCall(ctx, r, "request_refund")
		if err != nil {
			return err
		}
		_, err = r.Resume(ctx, machine.ResumeInput{SuspendID: c.SuspendID, Payload: map[string]bool{"ok": true}})
		return err
	})
	fmt.Println(approve)
	// Output: approve by webhook
}
