package executor

import (
	"strconv"

	"github.com/markov-agents/markov/message"
)

// RepairedIDPrefix starts the tool-use IDs the executor assigns when a
// provider's reply gives a tool use no ID, or one an earlier tool use of
// the same reply already has: such a tool use gets
// "toolu_markov_<t>_<k>", t being the reply's position in the leaf's
// transcript and k the tool use's position among the reply's tool uses
// (from 1).
const RepairedIDPrefix = "toolu_markov_"

// repairToolUseIDs makes every tool-use ID of a provider reply usable.
// Provider input is untrusted: a reply whose tool use has no ID, or repeats
// the ID of an earlier tool use of the same reply, would run its tools, be
// committed, and then be refused by llm.CheckPairing on every later model
// call. Each such tool use gets the ID
//
//	toolu_markov_<t>_<k>
//
// where t is the reply's position in the leaf's transcript (pos) and k the
// tool use's position among the reply's tool uses, from 1; "_<n>" is
// appended should the reply already use that ID. The repair depends on the
// reply and pos only, so it is deterministic. The first tool use with a
// given ID keeps it. parts is never modified: when IDs change, a copy is
// returned with the number of IDs repaired.
func repairToolUseIDs(parts []message.Part, pos int) ([]message.Part, int) {
	taken := map[string]bool{}
	for _, p := range parts {
		if p.Kind == message.KindToolUse && p.ID != "" {
			taken[p.ID] = true
		}
	}
	kept := make(map[string]bool, len(taken))
	var out []message.Part
	repaired, k := 0, 0
	for i, p := range parts {
		if p.Kind != message.KindToolUse {
			continue
		}
		k++
		if p.ID != "" && !kept[p.ID] {
			kept[p.ID] = true
			continue
		}
		if out == nil {
			out = append([]message.Part(nil), parts...)
		}
		base := RepairedIDPrefix + strconv.Itoa(pos) + "_" + strconv.Itoa(k)
		id := base
		for n := 2; taken[id]; n++ {
			id = base + "_" + strconv.Itoa(n)
		}
		taken[id] = true
		out[i].ID = id
		repaired++
	}
	if out == nil {
		return parts, 0
	}
	return out, repaired
}
