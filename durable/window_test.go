package durable_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
)

// tailSpy is a store that notes where each LoadTail starts.
type tailSpy struct {
	store.Store
	froms testkit.Log[int]
}

func (s *tailSpy) LoadTail(ctx context.Context, id string, from int) (*store.Snapshot, error) {
	s.froms.Add(from)
	return s.Store.(store.TailLoader).LoadTail(ctx, id, from)
}

// recordingModel answers a user message "loop N" with N calls to work
// one after the other, "ask" with a call to ask, any other user message
// with one call to work, and a tool result past those with a final
// answer; it keeps every request's transcript.
type recordingModel struct {
	sent testkit.Log[[]message.Message]
	mu   sync.Mutex
	left int // calls to make before the answer
}

func (r *recordingModel) model() llm.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		r.sent.Add(message.CloneAll(req.Messages))
		r.mu.Lock()
		defer r.mu.Unlock()
		if last := req.Messages[len(req.Messages)-1]; last.Role == message.User {
			r.left = 1
			fmt.Sscanf(last.Text(), "loop %d", &r.left)
		}
		if r.left == 0 {
			return scripted.Reply{Text: "done"}, nil
		}
		r.left--
		tool := "work"
		if last := req.Messages[len(req.Messages)-1]; last.Role == message.User && last.Text() == "ask" {
			tool = "ask"
		}
		return scripted.Reply{Calls: []scripted.Call{{ID: fmt.Sprintf("t%d-%d", len(req.Messages), r.left), Name: tool, Input: empty{}}}}, nil
	})
}

// windowCharter is a charter with a window of n messages: node desk with
// the tools work and ask (which suspends) and the command note, which
// only writes its record.
func windowCharter(t *testing.T, model llm.Model, n int) *machine.Charter {
	ask := node.NewTool("ask", "ask for approval", func(ctx *node.ToolContext[desk], _ empty) (string, error) {
		return "", ctx.Suspend("approval")
	})
	note := command.New("note", "note something", func(*command.Context[desk], empty) (string, error) { return "noted", nil })
	n1, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{workTool(), ask}, Commands: []command.Command[desk]{note}})
	require.NoError(t, err)
	c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n1}, Window: n})
	require.NoError(t, err)
	return c
}

// A run of a charter with a window loads the end of a long history only,
// and its model sees what it would have seen over the whole history: the
// run compared with the same run of the machine loaded whole, after
// turns, after records (commands) that no transcript shows, and after a
// long run of tool calls. The history it saves follows the stored one,
// and a later load (an inspection, another process's run) reads all of
// it.
func TestWindowedLoad(t *testing.T) {
	const window = 6
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		rec := &recordingModel{}
		c := windowCharter(t, rec.model(), window)
		spy := &tailSpy{Store: st}
		for _, cache := range []int64{-1, 0} {
			t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) {
				id := fmt.Sprintf("m%d", cache)
				r, err := durable.New(durable.Config{Store: spy, Charter: c, HistoryCache: cache})
				require.NoError(t, err)
				_, err = r.Create(ctx, id, "desk", nil)
				require.NoError(t, err)
				for i := range 30 {
					_, err := drain(r.Run(ctx, id, machine.UserText(fmt.Sprint("turn ", i))))
					require.NoError(t, err)
				}
				for _, text := range []string{"next", "notes", "after the notes", "loop 60", "after the loop", "again"} {
					if text == "notes" {
						for range 3 * 4 * (window + 4) {
							_, err := runSteps(r.Invoke(ctx, id, command.Invocation{Name: "note"}))
							require.NoError(t, err)
						}
						continue
					}
					whole, _, err := r.Load(ctx, id)
					require.NoError(t, err)
					rec.sent.Take()
					_, err = drain(whole.Run(ctx, machine.UserText(text)))
					require.NoError(t, err)
					want := rec.sent.Take()

					spy.froms.Take()
					_, err = drain(r.Run(ctx, id, machine.UserText(text)))
					require.NoError(t, err)
					require.Equal(t, want, rec.sent.Take(), "%q: the model saw other transcripts", text)
					for _, sent := range want {
						require.LessOrEqual(t, len(sent), window+1, "%q: the window is not applied", text)
					}
					// Past the loop, an instance the agent would start (it sees
					// none of the agent's tool exchanges) has its window further
					// back than the history holds: the whole of it is read.
					if froms := spy.froms.Take(); cache < 0 && (text == "next" || text == "after the notes") {
						require.Positive(t, froms[len(froms)-1], "%q: the run loaded the whole history", text)
					}

					after, _, err := r.Load(ctx, id)
					require.NoError(t, err)
					wh, ah := whole.History(), after.History()
					require.Equal(t, len(wh), len(ah), "%q: the saved history differs from a whole run's", text)
					for i := range wh {
						require.Equal(t, wh[i].Role, ah[i].Role, "%q: message %d", text, i)
						require.Equal(t, wh[i].Text(), ah[i].Text(), "%q: message %d", text, i)
					}
				}

				// A fresh-turn resume digests the whole transcript, and a
				// cancel of a call resolved long ago is told apart by the
				// history: their runs load all of it.
				steps, err := drain(r.Run(ctx, id, machine.UserText("ask")))
				require.NoError(t, err)
				sid := steps[len(steps)-1].Suspensions[0].SuspendID
				resume := machine.ResumeInput{SuspendID: sid, Payload: "yes", FreshTurn: true}
				whole, _, err := r.Load(ctx, id)
				require.NoError(t, err)
				rec.sent.Take()
				_, err = drain(whole.Run(ctx, resume))
				require.NoError(t, err)
				want := rec.sent.Take()
				_, err = drain(r.Run(ctx, id, resume))
				require.NoError(t, err)
				require.Equal(t, want, rec.sent.Take(), "the fresh turn's digest differs from a whole run's")
				// The same through an acceptance (resumehttp's 202 path).
				for i := range 30 {
					_, err := drain(r.Run(ctx, id, machine.UserText(fmt.Sprint("more ", i))))
					require.NoError(t, err)
				}
				steps, err = drain(r.Run(ctx, id, machine.UserText("ask")))
				require.NoError(t, err)
				resume = machine.ResumeInput{SuspendID: steps[len(steps)-1].Suspensions[0].SuspendID, Payload: "yes", FreshTurn: true}
				whole, _, err = r.Load(ctx, id)
				require.NoError(t, err)
				rec.sent.Take()
				_, err = drain(whole.Run(ctx, resume))
				require.NoError(t, err)
				want = rec.sent.Take()
				accepted, err := r.AcceptResume(ctx, resume)
				require.NoError(t, err)
				_, err = r.Await(ctx, accepted)
				require.NoError(t, err)
				require.Equal(t, want, rec.sent.Take(), "the accepted fresh turn's digest differs from a whole run's")
				for i := range 30 {
					_, err := drain(r.Run(ctx, id, machine.UserText(fmt.Sprint("later ", i))))
					require.NoError(t, err)
				}
				_, err = drain(r.Run(ctx, id, machine.CancelInput{SuspendID: sid}))
				require.ErrorIs(t, err, instance.ErrAlreadyResolved)
			})
		}
	})
}

// A status of a long machine reads the end of its history only, back to
// its last reply: the length and the last text it reports are those of
// the whole history, after turns and after records that push the last
// reply further back.
func TestStatusReadsTheEnd(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		rec := &recordingModel{}
		spy := &tailSpy{Store: st}
		r, err := durable.New(durable.Config{Store: spy, Charter: windowCharter(t, rec.model(), 0), HistoryCache: -1})
		require.NoError(t, err)
		_, err = r.Create(ctx, "m", "desk", nil)
		require.NoError(t, err)
		for i := range 60 {
			_, err := drain(r.Run(ctx, "m", machine.UserText(fmt.Sprint("turn ", i))))
			require.NoError(t, err)
		}
		for _, notes := range []int{0, 100} {
			for range notes {
				_, err := runSteps(r.Invoke(ctx, "m", command.Invocation{Name: "note"}))
				require.NoError(t, err)
			}
			whole, _, err := r.Load(ctx, "m")
			require.NoError(t, err)
			spy.froms.Take()
			status, err := r.Status(ctx, "m")
			require.NoError(t, err)
			require.Equal(t, len(whole.History()), status.Messages, "after %d notes", notes)
			require.Equal(t, "done", status.LastText, "after %d notes", notes)
			require.Equal(t, durable.StateDone, status.State, "after %d notes", notes)
			froms := spy.froms.Take()
			require.Positive(t, froms[len(froms)-1], "after %d notes: the status read the whole history", notes)
		}
	})
}
