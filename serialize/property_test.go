package serialize

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// gen builds random machines: random tree shapes, states, suspensions,
// held replies and messages. With utf8 set it sticks to what the JSON form
// keeps exactly: valid UTF-8 and compact JSON.
type gen struct {
	r        *rand.Rand
	utf8     bool
	ids      int
	suspends int
}

func newGen(seed uint64, utf8 bool) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), utf8: utf8}
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

var alphabet = []string{"a", "b", "z", " ", "é", "✓", "🙂", "<", "&", "\"", "\\", "\n", "\x00", "日本"}

func (g *gen) str(max int) string {
	n := g.r.IntN(max + 1)
	var b strings.Builder
	for range n {
		b.WriteString(alphabet[g.r.IntN(len(alphabet))])
	}
	if !g.utf8 && g.chance(0.05) {
		b.WriteString("\xff\xfe") // invalid UTF-8: kept exactly by msgpack
	}
	return b.String()
}

// jsonStr returns a valid UTF-8 string, for values stored as JSON in
// either form (held transitions, states of JSON-only types).
func (g *gen) jsonStr(max int) string {
	return strings.ToValidUTF8(g.str(max), "?")
}

func (g *gen) id(prefix string) string {
	g.ids++
	return fmt.Sprintf("%s-%d-%s", prefix, g.ids, g.str(3))
}

// jsonValue returns a random JSON-shaped value (what an interface field
// holds after decoding): nil, bool, float64, string, []any, map[string]any.
func (g *gen) jsonValue(depth int) any {
	k := g.r.IntN(6)
	if depth > 3 && k >= 4 {
		k = 3
	}
	switch k {
	case 0:
		return nil
	case 1:
		return g.chance(0.5)
	case 2:
		f := []float64{0, 1.5, -2, 1e300, math.SmallestNonzeroFloat64, float64(g.r.Int64N(1 << 50))}
		return f[g.r.IntN(len(f))]
	case 3:
		return g.str(8)
	case 4:
		n := g.r.IntN(4)
		s := make([]any, n)
		for i := range s {
			s[i] = g.jsonValue(depth + 1)
		}
		return s
	}
	n := g.r.IntN(4)
	m := make(map[string]any, n)
	for range n {
		m[g.str(4)] = g.jsonValue(depth + 1)
	}
	return m
}

// raw returns raw JSON; without utf8 it may be invalid or spaced.
func (g *gen) raw() json.RawMessage {
	if g.chance(0.2) {
		return nil
	}
	b, err := json.Marshal(g.jsonValue(0))
	if err != nil {
		panic(err)
	}
	if !g.utf8 {
		switch g.r.IntN(4) {
		case 0:
			return append([]byte(" "), append(b, ' ')...)
		case 1:
			return b[:len(b)/2+1]
		}
	}
	return b
}

func (g *gen) time() time.Time {
	if g.chance(0.1) {
		return time.Time{}
	}
	sec := g.r.Int64N(200 * 365 * 24 * 3600)
	nsec := int64(0)
	if g.chance(0.5) {
		nsec = g.r.Int64N(1e9)
	}
	return time.Unix(sec, nsec).UTC()
}

func (g *gen) state(node string) any {
	switch node {
	case "support":
		s := supportState{Orders: []int{}, Note: g.str(10), Since: g.time()}
		for range g.r.IntN(5) {
			s.Orders = append(s.Orders, int(g.r.Int64())-math.MaxInt64/2)
		}
		if g.chance(0.5) {
			s.Tags = map[string]string{}
			for range g.r.IntN(4) {
				s.Tags[g.str(5)] = g.str(5)
			}
		}
		if g.chance(0.5) {
			s.Extra = g.jsonValue(0)
		}
		return s
	case "review":
		return reviewState{Score: g.r.IntN(2000) - 1000}
	case "researcher":
		s := researchState{Topic: g.str(10)}
		for range g.r.IntN(3) {
			s.Findings = append(s.Findings, g.str(20))
		}
		return s
	}
	return vaultState{secret: g.jsonStr(10)}
}

var nodeNames = []string{"support", "review", "researcher", "vault"}

func (g *gen) instance(depth int) *instance.Instance {
	n := nodeNames[g.r.IntN(len(nodeNames))]
	if depth == 1 {
		n = "support"
	}
	in := &instance.Instance{ID: g.id("in"), Node: n, State: g.state(n), Idle: g.chance(0.5)}
	if g.chance(0.2) {
		in.MaxTokensStreak = g.r.IntN(3)
	}
	if g.chance(0.4) {
		in.Suspension = g.suspension(in.ID)
	}
	if depth < 5 && g.chance(0.6/float64(depth)) {
		for range 1 + g.r.IntN(3) {
			in.Children = append(in.Children, g.instance(depth+1))
		}
	}
	return in
}

var (
	kinds      = []instance.CallKind{instance.KindTool, instance.KindCommand, instance.KindInstance}
	initiators = []instance.Initiator{instance.ByTool, instance.ByCommand, instance.ByTransition, instance.ByCaller}
	statuses   = []instance.Status{instance.StatusPending, instance.StatusResolved, instance.StatusExpired, instance.StatusCancelled}
)

func (g *gen) suspension(instanceID string) *instance.SuspensionState {
	s := &instance.SuspensionState{}
	for range g.r.IntN(4) {
		g.suspends++
		c := instance.SuspendedCall{
			SuspendID: fmt.Sprintf("s-%d", g.suspends), InstanceID: instanceID,
			Kind: kinds[g.r.IntN(len(kinds))], Initiator: initiators[g.r.IntN(len(initiators))],
			Name: g.str(6), Input: g.raw(), Reason: g.str(12), SuspendedAt: g.time(),
			Status: statuses[g.r.IntN(len(statuses))], Stage: g.r.IntN(3),
		}
		if g.chance(0.5) {
			c.ToolUseID = g.id("tu")
		}
		if g.chance(0.5) {
			c.Metadata = g.validRaw()
		}
		if g.chance(0.3) {
			c.Deadline = g.time()
		}
		if g.chance(0.3) {
			c.TraceParent = fmt.Sprintf("00-%032x-%016x-01", g.r.Uint64(), g.r.Uint64())
		}
		if g.chance(0.3) {
			c.OnTimeout = instance.TimeoutAction{Resume: g.chance(0.5), Payload: g.validRaw(), IsError: g.chance(0.5), Summarize: g.chance(0.5)}
		}
		if g.chance(0.3) {
			c.Event = g.str(10)
		}
		if g.chance(0.3) {
			c.Digest = fmt.Sprintf("%016x", g.r.Uint64())
			c.Policy = &instance.Policy{Version: g.r.IntN(3), Subjects: []string{g.name(), g.name()}, Groups: []string{g.name()},
				Quorum: g.r.IntN(3), FirstDenyRejects: g.chance(0.5), SeparateDuties: g.chance(0.5), Requester: g.name(),
				Delegations: []instance.Delegation{{From: g.name(), To: g.name(), Until: g.time()}}}
			for range g.r.IntN(3) {
				c.Decisions = append(c.Decisions, instance.Decision{By: g.name(), For: g.name(), Groups: []string{g.name()},
					Deny: g.chance(0.5), IsError: g.chance(0.5), Payload: g.validRaw(), Digest: c.Digest, At: g.time()})
			}
		}
		s.Calls = append(s.Calls, c)
	}
	if g.chance(0.5) {
		r := &instance.HeldReply{Message: g.message(), Terminal: g.chance(0.3)}
		r.Message.Role = message.Assistant
		for range g.r.IntN(4) {
			r.Message.Parts = append(r.Message.Parts, message.ToolUse(g.id("tu"), g.str(5), g.raw()))
		}
		for _, u := range r.Message.ToolUses() {
			if g.chance(0.5) {
				r.Results = append(r.Results, message.Part{})
			} else {
				r.Results = append(r.Results, message.ToolResult(u.ID, g.str(10), g.chance(0.3)))
			}
		}
		if g.chance(0.6) {
			r.Transition = g.effect()
		}
		for range g.r.IntN(3) {
			r.Deferred = append(r.Deferred, g.message())
		}
		s.Reply = r
	}
	return s
}

// validRaw returns valid compact JSON (metadata and payloads always are).
func (g *gen) validRaw() json.RawMessage {
	b, _ := json.Marshal(g.jsonValue(0))
	return b
}

func (g *gen) effect() *instance.Effect {
	// Held transitions are stored as JSON: valid UTF-8 only.
	defer func(u bool) { g.utf8 = u }(g.utf8)
	g.utf8 = true
	switch g.r.IntN(4) {
	case 0:
		return &instance.Effect{Kind: instance.EffectGoto, Target: "review", State: g.state("review")}
	case 1:
		e := &instance.Effect{Kind: instance.EffectSpawn}
		for range 1 + g.r.IntN(3) {
			n := nodeNames[1+g.r.IntN(len(nodeNames)-1)]
			c := instance.Child{Node: n, State: g.state(n)}
			if g.chance(0.5) {
				c.ID = g.id("child")
			}
			e.Children = append(e.Children, c)
		}
		return e
	case 2:
		var content any = g.jsonStr(20)
		if g.chance(0.5) {
			b, _ := json.Marshal(map[string]any{"findings": g.jsonValue(1)})
			content = json.RawMessage(b)
		}
		return &instance.Effect{Kind: instance.EffectCede, Content: content}
	}
	return &instance.Effect{Kind: instance.EffectNone}
}

var roles = []message.Role{message.User, message.Assistant, message.Tool, message.Record}

func (g *gen) message() message.Message {
	m := message.Message{Role: roles[g.r.IntN(len(roles))], Silent: g.chance(0.1)}
	if g.chance(0.5) {
		m.Source = message.Source{InstanceID: g.str(4), Node: g.str(4), To: g.str(4)}
	}
	for range g.r.IntN(4) {
		var p message.Part
		switch g.r.IntN(6) {
		case 0:
			p = message.Text(g.str(30))
		case 1:
			p = message.ToolUse(g.id("tu"), g.str(6), g.raw())
		case 2:
			p = message.ToolResult(g.id("tu"), g.str(20), g.chance(0.3))
		case 3:
			p = message.Thinking(g.str(20), g.str(10))
		case 4:
			p = message.Structured(g.validRaw(), g.str(10))
		default:
			p = message.RecordPart(g.str(6), g.validRaw())
		}
		if g.chance(0.2) {
			p.SuspendID = g.id("s")
		}
		m.Parts = append(m.Parts, p)
	}
	return m
}

func (g *gen) machine(c *machine.Charter) (*machine.Machine, error) {
	root := g.instance(1)
	root.Packs = map[string]any{
		"billing": billingState{Credits: g.r.IntN(1000), Log: []string{g.str(5)}},
		"audit":   auditState{Entries: []vaultState{{g.jsonStr(5)}}},
	}
	var history []message.Message
	for range g.r.IntN(20) {
		history = append(history, g.message())
	}
	return machine.Restore(c, root, message.NewHistory(history))
}

func TestPropertyRoundTrip(t *testing.T) {
	c := charter(t)
	n := 300
	if testing.Short() {
		n = 50
	}
	for seed := range uint64(n) {
		for _, form := range forms {
			g := newGen(seed, form.name == "json")
			m, err := g.machine(c)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			data, err := form.marshal(m)
			if err != nil {
				t.Fatalf("seed %d %s: marshal: %v", seed, form.name, err)
			}
			if form.name == "json" && !utf8.Valid(data) {
				t.Fatalf("seed %d: JSON form is not UTF-8", seed)
			}
			got, err := form.unmarshal(c, data)
			if err != nil {
				t.Fatalf("seed %d %s: unmarshal: %v", seed, form.name, err)
			}
			sameMachine(t, m, got, form.opts...)
			if t.Failed() {
				t.Fatalf("seed %d %s", seed, form.name)
			}
		}
	}
}

// name is a short identity or group name (valid UTF-8, as a policy's
// names are).
func (g *gen) name() string { return fmt.Sprintf("p%d", g.r.IntN(100)) }
