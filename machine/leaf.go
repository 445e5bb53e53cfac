package machine

// This file builds what a leaf's step needs: the step requests of a round
// and the leaves' transcripts, kept incrementally.

import (
	"fmt"
	"slices"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// leafCache keeps what a leaf reuses round after round: its transcript,
// extended incrementally. While every message of history so far is
// visible to the leaf (shared), the transcript is history itself, capped,
// and costs nothing to build or extend: history only grows, so the
// messages below its length never change. At the first message the leaf
// must not see, the transcript becomes a copy of its own.
type leafCache struct {
	own  []message.Message // the transcript, once not shared
	next int               // history index the transcript has seen up to
	// diverged is set once the transcript is own.
	diverged bool
	// records counts the history's records restarted has read; restart
	// is set once one of them was a fresh-turn record for the leaf.
	records int
	restart bool
}

// cache returns the leaf cache of instance id.
func (m *Machine) cache(id string) *leafCache {
	c := m.leaves[id]
	if c == nil {
		c = &leafCache{}
		m.leaves[id] = c
	}
	return c
}

// transcript brings the leaf's transcript up to date with history and
// returns it, capped so no one can append into it. The primary leaf's is
// the one the history keeps (message.History.Follow, Transcript), and
// costs nothing, unless a fresh-turn record restarted it; any other is
// kept in the leaf's cache.
func (m *Machine) transcript(id string, c *leafCache, primary bool) []message.Message {
	if primary && !m.restarted(id, c) {
		m.history.Follow(id)
		if t, ok := m.history.Transcript(id); ok { // Follow makes it known
			return t
		}
	}
	h := m.history.Messages()
	if !c.diverged {
		// The leaf sees the history's prefix it knows of: a restored
		// machine's first round does not read it.
		c.next = max(c.next, m.history.SeenBy(id))
		for ; c.next < len(h); c.next++ {
			if !h[c.next].VisibleTo(id) {
				c.diverged = true
				c.own = ownTranscript(h[:c.next])
				break
			}
		}
		if !c.diverged {
			return h[:c.next:c.next]
		}
	}
	if c.next < m.fresh.from {
		for ; c.next < len(h); c.next++ {
			c.own = extendTranscript(c.own, &h[c.next], id)
		}
	} else {
		m.fresh.each(id, c.next, func(i int) { c.own = extendTranscript(c.own, &h[i], id) })
		c.next = len(h)
	}
	return c.own[:len(c.own):len(c.own)]
}

// restarted reports whether history holds a fresh-turn record for the
// leaf id: its transcript then starts at the last one's digest, which the
// history's own transcript does not know of (message.History.Transcript),
// and it is built in c. It reads only the records it has not read.
func (m *Machine) restarted(id string, c *leafCache) bool {
	records, h := m.history.Records(), m.history.Messages()
	for ; !c.restart && c.records < len(records); c.records++ {
		_, c.restart = freshTurnDigest(&h[records[c.records]], id)
	}
	return c.restart
}

// freshIndex sorts the messages history gained since from by whose
// transcript they may enter: scoped ones (Source.To) by instance, the
// rest (shared messages, unscoped records) in one list. A transcript
// up to date at from or later takes in the shared messages and its own,
// without looking at the other leaves' exchanges: a round of n leaves
// costs each leaf its own messages, not n leaves' worth.
type freshIndex struct {
	from   int
	shared []int
	scoped map[string][]int
}

// addAll indexes msgs, history from at on. Unless many leaves read
// history (with one, the index would only cost), it moves from past them
// instead: a leaf then reads them from history.
func (x *freshIndex) addAll(msgs []message.Message, at int, many bool) {
	if !many {
		x.from = at + len(msgs)
		return
	}
	for i := range msgs {
		x.add(&msgs[i], at+i)
	}
}

// add indexes history[i].
func (x *freshIndex) add(h *message.Message, i int) {
	if h.Source.To == "" {
		x.shared = append(x.shared, i)
		return
	}
	if x.scoped == nil {
		x.scoped = map[string][]int{}
	}
	x.scoped[h.Source.To] = append(x.scoped[h.Source.To], i)
}

// reset empties the index, which starts again at from. It keeps the
// lists' room for the next round, and forgets instances that got no
// message since the last reset.
func (x *freshIndex) reset(from int) {
	x.from, x.shared = from, x.shared[:0]
	for id, s := range x.scoped {
		if len(s) == 0 {
			delete(x.scoped, id)
		} else {
			x.scoped[id] = s[:0]
		}
	}
}

// each calls fn, in history order, with the index of every message
// since next (at least from) that may enter the transcript of id.
func (x *freshIndex) each(id string, next int, fn func(i int)) {
	shared, own := after(x.shared, next), after(x.scoped[id], next)
	for len(shared) > 0 || len(own) > 0 {
		if len(own) == 0 || len(shared) > 0 && shared[0] < own[0] {
			fn(shared[0])
			shared = shared[1:]
		} else {
			fn(own[0])
			own = own[1:]
		}
	}
}

// after returns the indexes of s, sorted, from next on.
func after(s []int, next int) []int {
	i, _ := slices.BinarySearch(s, next)
	return s[i:]
}

// ownTranscript copies a transcript into an array of its own with room
// for half as many messages again: the shared prefix of a transcript that
// diverges, or a full one that grows (extendTranscript). The workers of a
// machine diverge in the same round and take an exchange each round: with
// a quarter's room, a hundred of them over 100 messages of history all
// doubled their transcripts (append's growth) 16 rounds later; half again
// lasts them 29. Past 256 messages, append grows by a quarter, copying a
// transcript about four times per message it holds; half again, twice.
func ownTranscript(transcript []message.Message) []message.Message {
	n := len(transcript)
	out := make([]message.Message, n, n+n/2+8)
	copy(out, transcript)
	return out
}

// primaryLeaf returns the non-worker leaf of root, suspended or not, or
// nil.
func primaryLeaf(nodes map[string]*node.Node, root *instance.Instance) *instance.Instance {
	for l := range root.Leaves() {
		if n := nodes[l.Node]; n != nil && !n.Worker() {
			return l
		}
	}
	return nil
}

// stepRequests returns the step requests of a round: one per active leaf,
// in leaf order, each with its transcript brought up to date (and cut to
// the charter's window) and its
// recorded reply, if any (checkpoint mode: continued, not asked again). More than
// one non-worker leaf, active or not, is ErrPrimaryConflict.
func (m *Machine) stepRequests() ([]executor.StepRequest, error) {
	reqs := m.reqs[:0]
	primaries := 0
	for l := range m.root.Leaves() {
		primary := !m.charter.Node(l.Node).Worker()
		if primary {
			primaries++
		}
		if active(l) {
			t := message.Window(m.transcript(l.ID, m.cache(l.ID), primary), m.charter.window)
			reqs = append(reqs, executor.StepRequest{Root: m.root, Instance: l, Transcript: t, Reply: l.Reply, Admit: m.admission(), Journal: m.journal})
		}
	}
	// Every active leaf has seen all of history; one that has not (idle,
	// suspended) catches up by reading history when it next runs.
	m.fresh.reset(m.history.Len())
	m.reqs = reqs
	if primaries > 1 {
		return nil, fmt.Errorf("%w: %d non-worker leaves", executor.ErrPrimaryConflict, primaries)
	}
	return reqs, nil
}
