package console

import (
	"bytes"
	"encoding/json"

	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// editView is an approver's edit of a call's input (#33), as the decide
// and machine pages show it: who, and each field they changed.
type editView struct {
	By      string
	Changes []change
}

// change is one top-level field an edit changed: its value before and
// after, as JSON text ("" for a field the input did not have).
type change struct {
	Field, From, To string
}

// edits reads, from a machine's history, the edits made to each call's
// input, by suspend ID, oldest first.
func edits(m *machine.Machine) map[string][]editView {
	out := map[string][]editView{}
	if m == nil {
		return out
	}
	for _, msg := range m.History() {
		for _, p := range msg.Parts {
			if p.Kind != message.KindRecord || p.Name != "edited" || p.SuspendID == "" {
				continue
			}
			var r machine.EditedRecord
			if json.Unmarshal(p.Data, &r) == nil {
				out[p.SuspendID] = append(out[p.SuspendID], editView{By: r.By, Changes: changes(r.Before, r.Input)})
			}
		}
	}
	return out
}

// changes lists the top-level fields whose values differ between the
// JSON objects before and after, in after's field order then before's;
// inputs that are not both objects are one change of the whole value
// (field "input").
func changes(before, after json.RawMessage) []change {
	var bf, af map[string]json.RawMessage
	if json.Unmarshal(before, &bf) != nil || json.Unmarshal(after, &af) != nil || bf == nil || af == nil {
		if bytes.Equal(compact(before), compact(after)) {
			return nil
		}
		return []change{{Field: "input", From: string(compact(before)), To: string(compact(after))}}
	}
	var out []change
	seen := map[string]bool{}
	for _, f := range append(objectKeys(after), objectKeys(before)...) {
		if seen[f] {
			continue
		}
		seen[f] = true
		from, to := compact(bf[f]), compact(af[f])
		if !bytes.Equal(from, to) {
			out = append(out, change{Field: f, From: string(from), To: string(to)})
		}
	}
	return out
}

// compact is raw without insignificant space (raw itself when it is not
// valid JSON; nil for none).
func compact(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}
