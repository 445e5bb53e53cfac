package durabletest_test

import (
	"fmt"

	"github.com/markov-agents/markov/durable/durabletest"
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
