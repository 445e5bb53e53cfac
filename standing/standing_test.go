package standing_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/standing"
)

var now = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func call(kind instance.CallKind, name, input string) *instance.SuspendedCall {
	return &instance.SuspendedCall{SuspendID: "s1", Kind: kind, Name: name, Input: json.RawMessage(input)}
}

func ids(rules []standing.Rule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.ID)
	}
	return out
}

func TestMatch(t *testing.T) {
	set, err := standing.Compile([]standing.Rule{
		{ID: "small-refunds", Tool: "refund", Schema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer","maximum":50}},"required":["amount"]}`), Payload: json.RawMessage(`"approved"`)},
		{ID: "eu-refunds", Tool: "refund", CEL: `input.amount < 500 && input.country in ["DE", "FR"] && node == "desk"`, Payload: json.RawMessage(`"approved"`)},
		{ID: "acme-only", Tool: "refund", Scope: standing.Scope{Charter: "shop", Machine: "acme-*", Tenant: "acme", Node: "desk"}, Payload: json.RawMessage(`"approved"`)},
		{ID: "expired", Tool: "refund", Expires: now, Payload: json.RawMessage(`"approved"`)},
		{ID: "deploy", Command: "deploy", CEL: `input.env == "staging"`, Payload: json.RawMessage(`{"ok":true}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	desk := standing.Where{Charter: "shop", Node: "desk", Machine: "acme-7", Tenant: "acme"}
	for _, tc := range []struct {
		name string
		w    standing.Where
		call *instance.SuspendedCall
		want []string
	}{
		{"small", desk, call(instance.KindTool, "refund", `{"amount":20}`), []string{"small-refunds", "acme-only"}},
		{"eu", standing.Where{Node: "desk"}, call(instance.KindTool, "refund", `{"amount":200,"country":"FR"}`), []string{"eu-refunds"}},
		{"eu, other node", standing.Where{Node: "back"}, call(instance.KindTool, "refund", `{"amount":200,"country":"FR"}`), nil},
		{"too big", standing.Where{}, call(instance.KindTool, "refund", `{"amount":900,"country":"FR"}`), nil},
		{"CEL on a missing field", standing.Where{Node: "desk"}, call(instance.KindTool, "refund", `{"amount":200}`), nil},
		{"other tenant", standing.Where{Charter: "shop", Node: "desk", Machine: "acme-7", Tenant: "globex"}, call(instance.KindTool, "refund", `{"amount":900}`), nil},
		{"other machine", standing.Where{Charter: "shop", Node: "desk", Machine: "globex-1", Tenant: "acme"}, call(instance.KindTool, "refund", `{"amount":900}`), nil},
		{"other tool", desk, call(instance.KindTool, "pay", `{"amount":20}`), nil},
		{"a command", desk, call(instance.KindCommand, "deploy", `{"env":"staging"}`), []string{"deploy"}},
		{"a command, prod", desk, call(instance.KindCommand, "deploy", `{"env":"prod"}`), nil},
		{"a tool named as the command", desk, call(instance.KindTool, "deploy", `{"env":"staging"}`), nil},
		{"a whole instance", desk, call(instance.KindInstance, "refund", `{"amount":1}`), nil},
	} {
		if got := ids(set.Match(tc.w, tc.call, now)); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: matched %v; want %v", tc.name, got, tc.want)
		}
	}
	// Before its expiry the expired rule matched.
	if got := ids(set.Match(standing.Where{}, call(instance.KindTool, "refund", `{"amount":900}`), now.Add(-time.Second))); strings.Join(got, ",") != "expired" {
		t.Errorf("before the expiry: %v", got)
	}
}

// A governed call matches only when its policy allows rules, and a
// payload the call's schema refuses does not match.
func TestMatchPolicyAndPayload(t *testing.T) {
	set, err := standing.Compile([]standing.Rule{{ID: "r", Tool: "pay", Payload: json.RawMessage(`{"approved":true}`)}})
	if err != nil {
		t.Fatal(err)
	}
	c := call(instance.KindTool, "pay", `{}`)
	c.Policy = &instance.Policy{Subjects: []string{"ana"}}
	if got := set.Match(standing.Where{}, c, now); got != nil {
		t.Errorf("a policy without AllowRules matched %v", ids(got))
	}
	c.Policy.AllowRules = true
	if got := set.Match(standing.Where{}, c, now); len(got) != 1 {
		t.Errorf("a policy with AllowRules matched %v", ids(got))
	}
	c.PayloadSchema = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"],"additionalProperties":false}`)
	if got := set.Match(standing.Where{}, c, now); len(got) != 1 {
		t.Errorf("a payload the schema accepts matched %v", ids(got))
	}
	c.PayloadSchema = json.RawMessage(`{"type":"string"}`)
	if got := set.Match(standing.Where{}, c, now); got != nil {
		t.Errorf("a payload the schema refuses matched %v", ids(got))
	}
}

func TestCompileErrors(t *testing.T) {
	ok := json.RawMessage(`true`)
	for _, tc := range []struct {
		rules       []standing.Rule
		rule, field string
	}{
		{[]standing.Rule{{Tool: "t", Payload: ok}}, "#1", "id"},
		{[]standing.Rule{{ID: "a", Tool: "t", Payload: ok}, {ID: "a", Tool: "t", Payload: ok}}, "a", "id"},
		{[]standing.Rule{{ID: "a", Payload: ok}}, "a", "tool"},
		{[]standing.Rule{{ID: "a", Tool: "t", Command: "c", Payload: ok}}, "a", "tool"},
		{[]standing.Rule{{ID: "a", Tool: "t"}}, "a", "payload"},
		{[]standing.Rule{{ID: "a", Tool: "t", Payload: json.RawMessage(`{`)}}, "a", "payload"},
		{[]standing.Rule{{ID: "a", Tool: "t", Payload: ok, MaxUses: -1}}, "a", "max_uses"},
		{[]standing.Rule{{ID: "a", Tool: "t", Payload: ok, Schema: json.RawMessage(`{"type":3}`)}}, "a", "schema"},
		{[]standing.Rule{{ID: "a", Tool: "t", Payload: ok, CEL: `input.amount <`}}, "a", "cel"},
		{[]standing.Rule{{ID: "a", Tool: "t", Payload: ok, CEL: `input.amount + 1`}}, "a", "cel"},
		{[]standing.Rule{{ID: "a", Tool: "t", Payload: ok, CEL: `"x"`}}, "a", "cel"},
		{[]standing.Rule{{ID: "a", Tool: "t", Payload: ok, CEL: `nope == 1`}}, "a", "cel"},
		{[]standing.Rule{{ID: "a", Tool: "t", Payload: ok, Scope: standing.Scope{Machine: "["}}}, "a", "scope.machine"},
	} {
		_, err := standing.Compile(tc.rules)
		var re *standing.RuleError
		if !errors.As(err, &re) || !errors.Is(err, standing.ErrBadRule) || re.Rule != tc.rule || re.Field != tc.field {
			t.Errorf("Compile(%+v) = %v; want a RuleError of rule %s, field %s", tc.rules, err, tc.rule, tc.field)
			continue
		}
		if !strings.Contains(err.Error(), "rule "+tc.rule+": "+tc.field+":") {
			t.Errorf("the message %q names neither rule nor field", err)
		}
	}
}

func TestLoad(t *testing.T) {
	set, err := standing.Load(strings.NewReader(`[
		{"id": "small", "tool": "refund", "cel": "input.amount <= 50", "max_uses": 3,
		 "expires": "2031-01-01T00:00:00Z", "scope": {"tenant": "acme"}, "payload": "approved"}]`))
	if err != nil {
		t.Fatal(err)
	}
	r := set.Rules()[0]
	if r.ID != "small" || r.MaxUses != 3 || !r.Expires.Equal(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)) || r.Scope.Tenant != "acme" || string(r.Payload) != `"approved"` {
		t.Fatalf("loaded %+v", r)
	}
	for _, doc := range []string{`{}`, `[{"id":"a","tool":"t","payload":1,"color":"red"}]`, `[] []`, `[{"id":"a","tool":"t","payload":1,"cel":"1"}]`} {
		if _, err := standing.Load(strings.NewReader(doc)); !errors.Is(err, standing.ErrBadRule) {
			t.Errorf("Load(%s) = %v; want ErrBadRule", doc, err)
		}
	}
}

// FuzzLoad: any document either loads into a set whose rules match a call
// without panicking, or fails with ErrBadRule.
func FuzzLoad(f *testing.F) {
	f.Add(`[{"id":"a","tool":"t","payload":true}]`)
	f.Add(`[{"id":"a","tool":"t","cel":"input.n > 1 && name == 't'","schema":{"type":"object"},"payload":{"x":1},"scope":{"machine":"m-*"}}]`)
	f.Add(`[{"id":"a","command":"c","cel":"input[0] == 1","max_uses":2,"expires":"2030-01-01T00:00:00Z","payload":"x"}]`)
	f.Add(`[{"id":"a","tool":"t","cel":"size(input.s) > 2","payload":1}]`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, doc string) {
		set, err := standing.Load(strings.NewReader(doc))
		if err != nil {
			if !errors.Is(err, standing.ErrBadRule) {
				t.Fatalf("Load error %v does not wrap ErrBadRule", err)
			}
			return
		}
		for _, r := range set.Rules() {
			for _, in := range []string{`{"n":3,"s":"abcd"}`, `[1]`, `null`, `"x"`} {
				c := call(instance.KindTool, r.Tool, in)
				if r.Command != "" {
					c = call(instance.KindCommand, r.Command, in)
				}
				set.Match(standing.Where{Machine: "m-1"}, c, now)
			}
		}
	})
}
