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
// "toolu_markov_<r>_<k>", r being a fresh ID for the reply (Config.NewID)
// and k the tool use's position among the reply's tool uses (from 1).
// The ID, and the idempotency key made of it, is the call's alone in the
// machine's history: a position in the leaf's transcript would not be,
// as a window (machine.CharterConfig.Window) or a fresh turn keeps the
// transcript short.
const repairedIDPrefix = "toolu_markov_"

// repairToolUses makes every tool use of a provider reply one that
// providers accept back. Provider input is untrusted: a reply whose tool
// use has no ID, or repeats the ID of an earlier tool use of the same
// reply, would run its tools, be committed, and then be refused by
// llm.CheckPairing on every later model call; input that is not JSON
// would be refused by the next request to encode it. So:
//
//   - a missing or repeated ID becomes toolu_markov_<r>_<k> (see
//     repairedIDPrefix; r is what replyID returns, called once when the
//     reply needs a repaired ID), with "_<n>" appended should the reply
//     already use that ID; the first tool use with a given ID keeps it;
//   - input that is not JSON becomes llm.ToolInput of it (the tool then
//     reports the bad input to the model).
//
// The repair depends on the reply and replyID only. parts is never
// modified: when something changes, a copy is returned with the number of
// tool uses repaired.
func repairToolUses(parts []message.Part, replyID func() string) ([]message.Part, int) {
	taken := map[string]bool{}
	for _, p := range parts {
		if p.Kind == message.KindToolUse && p.ID != "" {
			taken[p.ID] = true
		}
	}
	kept := make(map[string]bool, len(taken))
	var out []message.Part
	repaired, k, reply := 0, 0, ""
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
		if reply == "" {
			reply = replyID()
		}
		base := repairedIDPrefix + reply + "_" + strconv.Itoa(k)
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
