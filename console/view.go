package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/errtext"
)

// item is one value of a call's input or metadata, laid out for people:
// Label is the schema's title (else the name), Description the schema's,
// Value the value formatted (an amount grouped, a date as a date, an
// option as its text, yes or no); Block marks a value that keeps its
// lines (a nested object, as indented JSON).
type item struct {
	Name, Label, Description, Value string
	Block                           bool
}

// layout lays the JSON value raw out by the schema schemaRaw (which may
// be empty): the properties of an object in the schema's order, then any
// others in the order written, each labelled by its title; a value that
// is not an object is one item named "input".
func layout(raw, schemaRaw json.RawMessage) []item {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s schema
	if len(schemaRaw) > 0 {
		_ = json.Unmarshal(schemaRaw, &s) // no schema: names and values alone
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		v, block := human(raw, &s)
		return []item{{Name: "input", Label: "input", Value: v, Block: block}}
	}
	names := slices.Clone(s.order)
	for _, k := range objectKeys(raw) {
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	var out []item
	for _, n := range names {
		v, ok := fields[n]
		if !ok {
			continue
		}
		p := s.Properties[n]
		if p == nil {
			p = &schema{}
		}
		it := item{Name: n, Label: n, Description: p.Description}
		if p.Title != "" {
			it.Label = p.Title
		}
		it.Value, it.Block = human(v, p)
		out = append(out, it)
	}
	return out
}

// human formats the JSON value raw, of schema s, for a person; block
// reports a value kept as indented JSON.
func human(raw json.RawMessage, s *schema) (text string, block bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return string(raw), true
	}
	switch v := v.(type) {
	case nil:
		return "—", false
	case bool:
		if v {
			return "yes", false
		}
		return "no", false
	case json.Number:
		return grouped(v.String()), false
	case string:
		return humanString(v, s.Format), false
	case []any:
		parts := make([]string, 0, len(v))
		for _, x := range v {
			switch x := x.(type) {
			case string:
				parts = append(parts, x)
			case json.Number:
				parts = append(parts, grouped(x.String()))
			default:
				return pretty(raw), true
			}
		}
		return strings.Join(parts, ", "), false
	}
	return pretty(raw), true
}

// humanString is a string value, a date or a time written as people
// read them when the schema's format says so or it is one (RFC 3339).
func humanString(v, format string) string {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil && format != "date" {
		return when(t)
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil && (format == "date" || format == "") {
		return t.Format("Mon 2 Jan 2006")
	}
	return v
}

// grouped writes a JSON number with its thousands grouped ("12,500.5");
// a number in exponent form is left as written.
func grouped(n string) string {
	if strings.ContainsAny(n, "eE") {
		return n
	}
	sign, whole, frac := "", n, ""
	if strings.HasPrefix(whole, "-") {
		sign, whole = "-", whole[1:]
	}
	if i := strings.IndexByte(whole, '.'); i >= 0 {
		whole, frac = whole[:i], whole[i:]
	}
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return sign + b.String() + frac
}

// when writes a moment for people, in UTC: "Sun 29 Nov 2026, 14:05 UTC".
func when(t time.Time) string { return t.UTC().Format("Mon 2 Jan 2006, 15:04 MST") }

// onTimeout says what happens to a call at its deadline.
func onTimeout(a instance.TimeoutAction) string {
	switch {
	case a.Resume && a.IsError:
		return "the call fails with the error set for the deadline"
	case a.Resume:
		return "the call is answered with the default set for the deadline"
	case a.Summarize:
		return "the agent is told the wait timed out, with what was pending"
	}
	return "the call fails: the agent is told no one decided in time"
}

// policyView is what the decide and machine pages show of a call's
// policy (#33): who may decide, how many must, who has, and the digest
// decisions name.
type policyView struct {
	// Who says who may decide ("ada, bob or a member of managers");
	// Rules the policy's other rules, in words.
	Who   string
	Rules []string
	// Progress is "1 of 2 approvals" while a quorum is not reached;
	// Decisions are those recorded, oldest first.
	Progress  string
	Decisions []instance.Decision
	Digest    string
}

// governance describes call's policy and decisions; nil for a call that
// has neither a policy nor a digest.
func governance(call *instance.SuspendedCall) *policyView {
	if call == nil || (call.Policy == nil && call.Digest == "") {
		return nil
	}
	g := &policyView{Digest: call.Digest, Decisions: call.Decisions, Who: "anyone signed in"}
	p := call.Policy
	if p == nil {
		return g
	}
	var who []string
	who = append(who, p.Subjects...)
	for _, gr := range p.Groups {
		who = append(who, "a member of "+gr)
	}
	if len(who) > 0 {
		g.Who = errtext.Alternatives(who)
	}
	quorum := max(p.Quorum, 1)
	if quorum > 1 {
		g.Rules = append(g.Rules, fmt.Sprintf("%d different people must agree", quorum))
	}
	if p.FirstDenyRejects {
		g.Rules = append(g.Rules, "the first refusal rejects it")
	}
	if p.SeparateDuties {
		r := "the person who asked may not decide"
		if p.Requester != "" {
			r = p.Requester + ", who asked, may not decide"
		}
		g.Rules = append(g.Rules, r)
	}
	for _, d := range p.Delegations {
		r := d.To + " decides for " + d.From
		if !d.Until.IsZero() {
			r += " until " + when(d.Until)
		}
		g.Rules = append(g.Rules, r)
	}
	yes := 0
	for _, d := range call.Decisions {
		if !d.Deny {
			yes++
		}
	}
	g.Progress = fmt.Sprintf("%d of %d approvals", yes, quorum)
	return g
}

// asker says who asked for a call: the policy's requester when it names
// one, else what suspended it.
func asker(call *instance.SuspendedCall, node string) string {
	if call.Policy != nil && call.Policy.Requester != "" {
		return call.Policy.Requester
	}
	switch call.Initiator {
	case instance.ByCommand:
		return "the command " + call.Name
	case instance.ByCaller:
		return "the program running the agent"
	}
	if node != "" {
		return "the agent, at node " + node
	}
	return "the agent"
}
