// Package standing is standing approvals: rules that decide matching
// suspensions at once, so that people only see what needs them.
//
// A [Rule] names the tool or command it decides, a predicate over the
// call's input — a JSON Schema the input must satisfy, a CEL expression
// (github.com/google/cel-go) that must be true, or both — a [Scope]
// (charter, node, machine, tenant), an expiry, a maximum number of uses
// and the payload it decides with. [Compile] checks a list of rules and
// returns a [Set]; a rule that does not compile is a [*RuleError] naming
// the rule and the field. [Load] reads rules from JSON (a file for
// `markov serve`).
//
// A Set only matches; a durable runner (durable.Config.Rules) counts the
// uses in its store, fleet-wide, and resolves the call in the step that
// suspends it, before any save: the suspension is never pending in the
// store, and its decision names the rule.
package standing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/google/cel-go/cel"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/frame"
)

// Rule is a standing approval: a call it matches is decided at once with
// Payload, in the rule's name.
type Rule struct {
	// ID names the rule in decisions, the machine's log and the audit
	// log. Required, unique in a Set, a valid store ID.
	ID string `json:"id"`
	// Tool and Command name the tool or the command whose calls the rule
	// decides; exactly one is set.
	Tool    string `json:"tool,omitempty"`
	Command string `json:"command,omitempty"`
	// Schema, when set, is a JSON Schema the call's input must satisfy.
	Schema json.RawMessage `json:"schema,omitempty"`
	// CEL, when set, is a CEL expression of type bool over the call:
	// input (its JSON input), name (the tool or command) and node. The
	// call matches when it is true.
	CEL string `json:"cel,omitempty"`
	// Scope limits where the rule applies.
	Scope Scope `json:"scope,omitzero"`
	// Expires, when set, is when the rule stops deciding.
	Expires time.Time `json:"expires,omitzero"`
	// MaxUses, when positive, is how many calls the rule may decide, in
	// all, counted by the store fleet-wide; 0 means no limit.
	MaxUses int64 `json:"max_uses,omitempty"`
	// Payload is the decision's payload (the tool's or command's resume
	// payload): it must satisfy the call's payload schema, or the rule
	// does not match the call. Required.
	Payload json.RawMessage `json:"payload"`
}

// Scope is where a rule applies; each field set must match, an empty one
// matches anything.
type Scope struct {
	// Charter is the charter's name (machine.CharterConfig.Name).
	Charter string `json:"charter,omitempty"`
	// Node is the node whose call it is.
	Node string `json:"node,omitempty"`
	// Machine is a machine ID, or a pattern of path.Match ("refund-*").
	Machine string `json:"machine,omitempty"`
	// Tenant is the tenant label of the runner (durable.Config.Tenant).
	Tenant string `json:"tenant,omitempty"`
}

// Where is where a call was made, matched against a rule's Scope.
type Where struct {
	Charter, Node, Machine, Tenant string
}

// Set is a compiled list of rules.
type Set struct {
	rules []compiled
}

type compiled struct {
	rule   Rule
	schema *frame.Schema
	prog   cel.Program
}

// celEnv is the environment of rule expressions.
var celEnv = func() *cel.Env {
	env, err := cel.NewEnv(
		cel.Variable("input", cel.DynType),
		cel.Variable("name", cel.StringType),
		cel.Variable("node", cel.StringType),
	)
	if err != nil {
		panic(err)
	}
	return env
}()

// Compile checks rules and returns them as a Set, in their order (the
// first rule that matches a call and has a use left decides it). A rule
// that does not compile is a *RuleError naming it and the field: an ID
// missing, repeated or not a valid ID; neither or both of Tool and
// Command; a Schema or CEL expression that does not compile, or a CEL
// expression not of type bool; a Scope.Machine that is not a valid
// pattern; a negative MaxUses; a Payload missing or not JSON.
func Compile(rules []Rule) (*Set, error) {
	s := &Set{rules: make([]compiled, 0, len(rules))}
	seen := map[string]bool{}
	for i, r := range rules {
		name := r.ID
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		bad := func(field string, err error) error { return &RuleError{Rule: name, Field: field, Err: err} }
		c := compiled{rule: r}
		switch {
		case r.ID == "":
			return nil, bad("id", errors.New("required"))
		case len(r.ID) > 256 || strings.ContainsRune(r.ID, 0):
			return nil, bad("id", errors.New("longer than 256 bytes or with a NUL byte"))
		case seen[r.ID]:
			return nil, bad("id", errors.New("used by an earlier rule"))
		case (r.Tool == "") == (r.Command == ""):
			return nil, bad("tool", errors.New("set exactly one of tool and command"))
		case r.MaxUses < 0:
			return nil, bad("max_uses", fmt.Errorf("%d is negative", r.MaxUses))
		case len(bytes.TrimSpace(r.Payload)) == 0:
			return nil, bad("payload", errors.New("required"))
		case !json.Valid(r.Payload):
			return nil, bad("payload", errors.New("not valid JSON"))
		}
		seen[r.ID] = true
		if _, err := path.Match(r.Scope.Machine, ""); err != nil {
			return nil, bad("scope.machine", err)
		}
		if len(r.Schema) > 0 {
			sc, err := frame.ParseSchema(r.Schema)
			if err != nil {
				return nil, bad("schema", err)
			}
			c.schema = sc
		}
		if r.CEL != "" {
			ast, iss := celEnv.Compile(r.CEL)
			if iss.Err() != nil {
				return nil, bad("cel", iss.Err())
			}
			if ast.OutputType() != cel.BoolType {
				return nil, bad("cel", fmt.Errorf("of type %s, want bool", ast.OutputType()))
			}
			prog, err := celEnv.Program(ast)
			if err != nil {
				return nil, bad("cel", err)
			}
			c.prog = prog
		}
		c.rule.Payload = append(json.RawMessage(nil), r.Payload...)
		s.rules = append(s.rules, c)
	}
	return s, nil
}

// Load reads rules from JSON — an array of Rule objects; unknown fields
// are refused — and compiles them. A document that does not decode wraps
// ErrBadRule.
func Load(r io.Reader) (*Set, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var rules []Rule
	if err := dec.Decode(&rules); err != nil {
		return nil, fmt.Errorf("%w: decode: %v", ErrBadRule, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: decode: data after the rules", ErrBadRule)
	}
	return Compile(rules)
}

// Len returns the number of rules in s.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Rules returns the rules of s, in order.
func (s *Set) Rules() []Rule {
	if s == nil {
		return nil
	}
	out := make([]Rule, len(s.rules))
	for i, c := range s.rules {
		out[i] = c.rule
	}
	return out
}

// Match returns the rules that match call, made at w, at now, in order:
// the call is a tool or command call of the rule's name, in its scope,
// before its expiry, whose input satisfies its schema and CEL expression,
// and whose payload schema accepts the rule's payload. It does not count
// uses. A call governed by a policy that does not allow rules
// (instance.Policy.AllowRules) matches none.
func (s *Set) Match(w Where, call *instance.SuspendedCall, now time.Time) []Rule {
	if s == nil || (call.Policy != nil && !call.Policy.AllowRules) {
		return nil
	}
	var out []Rule
	for _, c := range s.rules {
		if c.matches(w, call, now) {
			out = append(out, c.rule)
		}
	}
	return out
}

func (c *compiled) matches(w Where, call *instance.SuspendedCall, now time.Time) bool {
	r := &c.rule
	switch call.Kind {
	case instance.KindTool:
		if r.Tool != call.Name {
			return false
		}
	case instance.KindCommand:
		if r.Command != call.Name {
			return false
		}
	default:
		return false
	}
	if !r.Expires.IsZero() && !now.Before(r.Expires) {
		return false
	}
	if !r.Scope.covers(w) {
		return false
	}
	input := call.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("null")
	}
	if c.schema != nil && c.schema.Validate(input) != nil {
		return false
	}
	if c.prog != nil {
		var v any
		if json.Unmarshal(input, &v) != nil {
			return false
		}
		out, _, err := c.prog.Eval(map[string]any{"input": v, "name": call.Name, "node": w.Node})
		if err != nil || out.Value() != true {
			return false
		}
	}
	return frame.CheckPayload(call, r.Payload, false) == nil
}

func (s Scope) covers(w Where) bool {
	if s.Machine != "" {
		if ok, _ := path.Match(s.Machine, w.Machine); !ok {
			return false
		}
	}
	return (s.Charter == "" || s.Charter == w.Charter) &&
		(s.Node == "" || s.Node == w.Node) &&
		(s.Tenant == "" || s.Tenant == w.Tenant)
}
