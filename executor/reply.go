package executor

import (
	"encoding/json"
	"strconv"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// repairedIDPrefix starts the tool-use IDs the executor assigns when a
// provider's reply gives a tool use no ID, or one an earlier tool use of
// the same reply already has: such a tool use gets
// "toolu_markov_<t>_<k>", t being the reply's position in the leaf's
// transcript and k the tool use's position among the reply's tool uses
// (from 1).
const repairedIDPrefix = "toolu_markov_"

// repairToolUses makes every tool use of a provider reply one that
// providers accept back. Provider input is untrusted: a reply whose tool
// use has no ID, or repeats the ID of an earlier tool use of the same
// reply, would run its tools, be committed, and then be refused by
// llm.CheckPairing on every later model call; input that is not JSON
// would be refused by the next request to encode it. So:
//
//   - a missing or repeated ID becomes toolu_markov_<t>_<k> (see
//     repairedIDPrefix; t is pos), with "_<n>" appended should the reply
//     already use that ID; the first tool use with a given ID keeps it;
//   - input that is not JSON becomes llm.ToolInput of it (the tool then
//     reports the bad input to the model).
//
// The repair depends on the reply and pos only, so it is deterministic.
// parts is never modified: when something changes, a copy is returned with
// the number of tool uses repaired.
func repairToolUses(parts []message.Part, pos int) ([]message.Part, int) {
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
		goodID := p.ID != "" && !kept[p.ID]
		goodInput := json.Valid(p.Data)
		if goodID {
			kept[p.ID] = true
		}
		if goodID && goodInput {
			continue
		}
		if out == nil {
			out = append([]message.Part(nil), parts...)
		}
		repaired++
		if !goodInput {
			out[i].Data = llm.ToolInput(p.Data)
		}
		if goodID {
			continue
		}
		base := repairedIDPrefix + strconv.Itoa(pos) + "_" + strconv.Itoa(k)
		id := base
		for n := 2; taken[id]; n++ {
			id = base + "_" + strconv.Itoa(n)
		}
		taken[id] = true
		out[i].ID = id
	}
	if out == nil {
		return parts, 0
	}
	return out, repaired
}
