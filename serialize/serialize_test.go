package serialize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

func TestRoundTripScenarios(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			m := sc.build(t)
			data, err := Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Unmarshal(charter(t), data)
			if err != nil {
				t.Fatal(err)
			}
			sameMachine(t, m, got)
			again, err := Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, again) {
				t.Error("re-encoding a decoded machine changed its bytes")
			}

			js, err := MarshalJSON(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err = UnmarshalJSON(charter(t), js)
			if err != nil {
				t.Fatal(err)
			}
			sameMachine(t, m, got)
			if !json.Valid(js) {
				t.Error("JSON form is not valid JSON")
			}

			got, err = Assemble(charter(t), must(MarshalTree(m)), historyBlobs(m))
			if err != nil {
				t.Fatal(err)
			}
			sameMachine(t, m, got)
		})
	}
}

// TestAssembleOnto decodes every split of a machine's history into a
// decoded prefix and a tail of entries: a prefix with room for the tail,
// whose spare capacity holds messages of some other history (a run that
// appended and did not save), or without.
func TestAssembleOnto(t *testing.T) {
	m := kitchenSink(t)
	history, blobs, tree := m.History(), historyBlobs(m), must(MarshalTree(m))
	stale := message.Message{Role: message.Assistant, Silent: true, Source: message.Source{InstanceID: "x", Node: "n", To: "y"},
		Parts: []message.Part{{Kind: message.KindToolUse, ID: "stale", Name: "stale", Data: json.RawMessage(`{}`), Signature: "s", SuspendID: "u"}}}
	for n := range len(history) + 1 {
		for _, room := range []bool{false, true} {
			prefix := append([]message.Message(nil), history[:n]...)
			if room {
				for range len(history) - n {
					prefix = append(prefix, stale)
				}
				prefix = prefix[:n]
			}
			got, err := AssembleOnto(charter(t), tree, message.NewHistory(prefix), blobs[n:])
			if err != nil {
				t.Fatalf("prefix %d: %v", n, err)
			}
			sameMachine(t, m, got)
		}
	}
}

// TestAssembleLong decodes a history long enough for the decoder's slabs:
// every message as it was, and none sharing memory another can reach by
// appending.
func TestAssembleLong(t *testing.T) {
	m := kitchenSink(t)
	var history []message.Message
	for len(history) < 600 {
		history = append(history, m.History()...)
	}
	long, err := machine.Restore(m.Charter(), m.Root(), message.NewHistory(history))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Assemble(charter(t), must(MarshalTree(long)), historyBlobs(long))
	if err != nil {
		t.Fatal(err)
	}
	sameMachine(t, long, got)
	h := got.History()
	for i := range h {
		for j := range h[i].Parts {
			p := &h[i].Parts[j]
			if cap(p.Data) != len(p.Data) {
				t.Fatalf("message %d part %d: data of capacity %d, length %d", i, j, cap(p.Data), len(p.Data))
			}
		}
		if cap(h[i].Parts) != len(h[i].Parts) {
			t.Fatalf("message %d: parts of capacity %d, length %d", i, cap(h[i].Parts), len(h[i].Parts))
		}
	}
}

// TestEverything round-trips a hand-built machine with every field set.
func TestRoundTripEveryField(t *testing.T) {
	m := kitchenSink(t)
	for _, form := range forms {
		t.Run(form.name, func(t *testing.T) {
			data, err := form.marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := form.unmarshal(charter(t), data)
			if err != nil {
				t.Fatal(err)
			}
			sameMachine(t, m, got, form.opts...)
		})
	}
}

var forms = []struct {
	name      string
	marshal   func(*machine.Machine) ([]byte, error)
	unmarshal func(*machine.Charter, []byte) (*machine.Machine, error)
	opts      []cmp.Option
}{
	{"msgpack", Marshal, Unmarshal, nil},
	// The JSON form compacts raw JSON values.
	{"json", MarshalJSON, UnmarshalJSON, []cmp.Option{compactJSON}},
}

// compactJSON compares raw JSON values compacted (when valid).
var compactJSON = cmp.FilterValues(func(a, b json.RawMessage) bool { return len(a) > 0 && len(b) > 0 },
	cmp.Comparer(func(a, b json.RawMessage) bool { return compact(a) == compact(b) }))

func compact(r []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, r) != nil {
		return string(r)
	}
	return b.String()
}

// kitchenSink builds a machine with every field of every record set,
// through machine.Restore, with a message of more than 64 KiB.
func kitchenSink(t testing.TB) *machine.Machine { return kitchenSinkN(t, 14000) }

// kitchenSinkN is kitchenSink with a long message of 5×n bytes.
func kitchenSinkN(t testing.TB, n int) *machine.Machine {
	t.Helper()
	c := charter(t)
	tu := message.ToolUse("tu-1", "request_refund", json.RawMessage(`{"order_id": 1}`))
	tu2 := message.ToolUse("tu-2", "lookup", json.RawMessage(`{"order_id":2`)) // cut off: not valid JSON
	held := message.Message{Role: message.Assistant, Parts: []message.Part{message.Thinking("", "redacted-sig"), message.Text("checking"), tu, tu2}, Source: message.Source{InstanceID: "root", Node: "support", To: "root"}}
	result := message.ToolResult("tu-2", "not found", true)
	root := &instance.Instance{
		ID: "root", Node: "support",
		State:           supportState{Orders: []int{1, -2, 1 << 40}, Note: "ünïcode ✓ <&>", Since: t0.Add(-48 * 3600e9), Tags: map[string]string{"b": "2", "a": "1"}, Extra: []any{"x", 2.5, true, nil, map[string]any{"k": "v"}}},
		Packs:           map[string]any{"billing": billingState{Credits: -3, Log: []string{"a"}}, "audit": auditState{Entries: []vaultState{{"s1"}, {"s2"}}}},
		Idle:            false,
		MaxTokensStreak: 1,
		Suspension: &instance.SuspensionState{
			Calls: []instance.SuspendedCall{{
				SuspendID: "s-1", InstanceID: "root", ToolUseID: "tu-1", Kind: instance.KindTool, Initiator: instance.ByTool,
				Name: "request_refund", Input: json.RawMessage(`{"order_id": 1}`), Metadata: json.RawMessage(`{"why":"big"}`),
				Reason: "needs approval", SuspendedAt: t0, Deadline: t0.Add(3600e9),
				OnTimeout: instance.TimeoutAction{Resume: true, Payload: json.RawMessage(`"late"`), IsError: true},
				Status:    instance.StatusPending, Stage: 2,
			}, {
				SuspendID: "s-0", InstanceID: "root", ToolUseID: "tu-2", Kind: instance.KindTool, Initiator: instance.ByTool,
				Name: "lookup", Input: json.RawMessage(`{"order_id":2`), SuspendedAt: t0.Add(-1), Status: instance.StatusResolved,
			}},
			Reply: &instance.HeldReply{
				Message:    held,
				Results:    []message.Part{{}, result},
				Transition: &instance.Effect{Kind: instance.EffectGoto, Target: "review", State: reviewState{Score: 9}},
				Terminal:   true,
			},
		},
		Children: []*instance.Instance{
			{ID: "w-1", Node: "researcher", State: researchState{Topic: "a", Findings: []string{"f"}}, Idle: true,
				Suspension: &instance.SuspensionState{Calls: []instance.SuspendedCall{{
					SuspendID: "s-2", InstanceID: "w-1", Kind: instance.KindInstance, Initiator: instance.ByCaller, Reason: "pause",
					SuspendedAt: t0, Status: instance.StatusPending,
				}}}},
			{ID: "w-2", Node: "vault", State: vaultState{"shh"}, Children: []*instance.Instance{
				{ID: "w-3", Node: "researcher", State: researchState{},
					Suspension: &instance.SuspensionState{
						Calls: []instance.SuspendedCall{{SuspendID: "s-3", InstanceID: "w-3", Kind: instance.KindCommand, Initiator: instance.ByCommand, Name: "escalate", Input: json.RawMessage(`{}`), Status: instance.StatusPending}},
						Reply: &instance.HeldReply{
							Message:    message.Message{Role: message.Assistant, Parts: []message.Part{message.ToolUse("tu-9", "cede", json.RawMessage(`{"content":"x"}`))}},
							Results:    []message.Part{{}},
							Transition: &instance.Effect{Kind: instance.EffectCede, Content: "the findings"},
						},
					}},
				{ID: "w-4", Node: "review", State: reviewState{Score: 1},
					Suspension: &instance.SuspensionState{Calls: []instance.SuspendedCall{{SuspendID: "s-4", Status: instance.StatusPending, Kind: instance.KindTool, ToolUseID: "tu-10"}},
						Reply: &instance.HeldReply{
							Message: message.Message{Role: message.Assistant, Parts: []message.Part{message.ToolUse("tu-10", "approve", nil), message.ToolUse("tu-11", "research", json.RawMessage(`{}`))}},
							Results: []message.Part{{}, message.ToolResult("tu-11", "spawned", false)},
							Transition: &instance.Effect{Kind: instance.EffectSpawn, Children: []instance.Child{
								{ID: "c-1", Node: "researcher", State: researchState{Topic: "t"}},
								{Node: "vault", State: vaultState{"v"}},
							}},
						}}},
			}},
		},
	}
	history := []message.Message{
		message.UserText("hello"),
		{Role: message.User, Parts: []message.Part{message.Text("quiet")}, Silent: true},
		{Role: message.Assistant, Parts: []message.Part{message.Thinking("hmm", "sig=="), message.Text("hi"), message.ToolUse("tu-0", "lookup", json.RawMessage(` { "order_id" : 3 } `))}, Source: message.Source{InstanceID: "root", Node: "support"}},
		{Role: message.Tool, Parts: []message.Part{{Kind: message.KindToolResult, ID: "tu-0", Text: "err", IsError: true, SuspendID: "s-old"}}, Source: message.Source{InstanceID: "root", Node: "support", To: "root"}},
		{Role: message.Assistant, Parts: []message.Part{message.Structured(json.RawMessage(`{"a":[1,2]}`), `{"a": [1, 2]}`)}},
		{Role: message.Record, Parts: []message.Part{{Kind: message.KindRecord, Name: "command", Data: json.RawMessage(`{"command":"note"}`), SuspendID: "s-x"}}, Source: message.Source{InstanceID: "root", Node: "support", To: "root"}},
		{Role: message.User, Parts: []message.Part{message.Text(strings.Repeat("long ", n))}},
		{Role: message.Assistant},
	}
	m, err := machine.Restore(c, root, message.NewHistory(history))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMessageRoundTrip(t *testing.T) {
	for _, msg := range kitchenSink(t).History() {
		got, err := UnmarshalMessage(must(MarshalMessage(msg)))
		if err != nil {
			t.Fatal(err)
		}
		sameValue(t, msg, got)
	}
}

func sameValue[T any](t testing.TB, want, got T) {
	t.Helper()
	if d := diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestDecodeErrors(t *testing.T) {
	c := charter(t)
	good, err := Marshal(suspendedMachine(t))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := MarshalTree(suspendedMachine(t))
	if err != nil {
		t.Fatal(err)
	}
	body := good[headerSize:]
	reseal := func(b []byte) []byte { return seal(append(header(nil, kindMachine), b...)) }
	future := append([]byte(nil), good...)
	future[4] = Version + 1
	zero := append([]byte(nil), good...)
	zero[4] = 0
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0x20
	tests := []struct {
		name string
		data []byte
		want []error
	}{
		{"empty", nil, []error{ErrCorrupt}},
		{"short", good[:5], []error{ErrCorrupt}},
		{"bad magic", append([]byte("XXXX"), good[4:]...), []error{ErrCorrupt}},
		{"future version", future, []error{ErrVersion}},
		{"version zero", zero, []error{ErrCorrupt}},
		{"tree for machine", tree, []error{ErrCorrupt}},
		{"truncated", good[:len(good)-3], []error{ErrCorrupt}},
		{"bit flip", flipped, []error{ErrCorrupt}},
		{"truncated body resealed", reseal(body[:len(body)-3]), []error{ErrCorrupt}},
		{"trailing bytes", reseal(append(append([]byte(nil), body...), 0xc0)), []error{ErrCorrupt}},
		{"not a map", reseal([]byte{0x93, 1, 2, 3}), []error{ErrCorrupt}},
		{"no root", reseal([]byte{0x80}), []error{ErrCorrupt}},
		{"huge array", reseal([]byte{0x81, 0xa1, 'h', 0xdd, 0xff, 0xff, 0xff, 0xff}), []error{ErrCorrupt}},
		{"huge map", reseal([]byte{0xdf, 0xff, 0xff, 0xff, 0xff}), []error{ErrCorrupt}},
		{"huge string", reseal([]byte{0x81, 0xa1, 'r', 0x81, 0xa1, 'i', 0xdb, 0x7f, 0xff, 0xff, 0xff}), []error{ErrCorrupt}},
		// msgpack/v5 would allocate the whole claimed slice up front.
		{"state with a huge array", reseal(rootOnly("support", []byte{0x81, 0xa6, 'o', 'r', 'd', 'e', 'r', 's', 0xdd, 0x7f, 0xff, 0xff, 0xff})), []error{ErrCorrupt}},
		{"deep tree", reseal(deepTree(MaxDepth + 1)), []error{ErrCorrupt, ErrLimit}},
		{"deep state", reseal(deepState(maxStateDepth + 10)), []error{ErrCorrupt, ErrLimit}},
		{"very deep state", reseal(deepState(1 << 20)), []error{ErrCorrupt, ErrLimit}},
		{"unknown node", reseal(rootOnly("nobody", []byte{0x80})), []error{machine.ErrInvalidTree, executor.ErrUnknownNode}},
		{"state of wrong type", reseal(rootOnly("support", []byte{0xa3, 'a', 'b', 'c'})), []error{machine.ErrInvalidTree, instance.ErrInvalidState}},
		{"state fails validation", reseal(rootOnly("support", tooManyOrders())), []error{machine.ErrInvalidTree, instance.ErrInvalidState}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Unmarshal(c, tt.data)
			if err == nil {
				t.Fatalf("no error; machine %v", m.Root())
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q does not wrap %q", err, w)
				}
			}
		})
	}
}

// rootOnly returns a machine body with a root of node and raw state.
func rootOnly(node string, state []byte) []byte {
	b := appendMapLen(nil, 1)
	b = appendKey(b, "r")
	b = appendMapLen(b, 3)
	b = appendKey(b, "i")
	b = appendStr(b, "root")
	b = appendKey(b, "n")
	b = appendStr(b, node)
	b = appendKey(b, "s")
	return append(b, state...)
}

func tooManyOrders() []byte {
	orders := make([]int, 101)
	b, err := appendState(nil, supportState{Orders: orders})
	if err != nil {
		panic(err)
	}
	return b
}

// deepTree returns a machine body whose tree is depth levels deep.
func deepTree(depth int) []byte {
	state, _ := appendState(nil, reviewState{})
	b := appendMapLen(nil, 1)
	b = appendKey(b, "r")
	for i := range depth {
		n := 4
		if i == depth-1 {
			n = 3
		}
		b = appendMapLen(b, n)
		b = appendKey(b, "i")
		b = appendStr(b, "in-"+string(rune('a'+i%26))+strings.Repeat("x", i/26))
		b = appendKey(b, "n")
		b = appendStr(b, "review")
		b = appendKey(b, "s")
		b = append(b, state...)
		if i < depth-1 {
			b = appendKey(b, "c")
			b = appendArrayLen(b, 1)
		}
	}
	return b
}

// deepState returns a machine body whose root state nests depth levels.
func deepState(depth int) []byte {
	state := bytes.Repeat([]byte{0x81, 0xa1, 'x'}, depth)
	state = append(state, 0xc0)
	// {"extra": {x: {x: …}}}
	s := appendMapLen(nil, 2)
	s = appendStr(s, "orders")
	s = appendArrayLen(s, 0)
	s = appendStr(s, "extra")
	s = append(s, state...)
	return rootOnly("support", s)
}

func TestDecodeJSONErrors(t *testing.T) {
	c := charter(t)
	tests := []struct {
		name string
		data string
		want []error
	}{
		{"empty", ``, []error{ErrCorrupt}},
		{"not an object", `[1]`, []error{ErrCorrupt}},
		{"other format", `{"format":"x","version":1}`, []error{ErrCorrupt}},
		{"future version", `{"format":"markov","version":2,"r":{"i":"a","n":"support","s":{}}}`, []error{ErrVersion}},
		{"future shape", `{"format":"markov","version":9,"r":[1,2]}`, []error{ErrVersion}},
		{"no root", `{"format":"markov","version":1}`, []error{ErrCorrupt}},
		{"no version", `{"format":"markov","r":{"i":"a","n":"support","s":{}}}`, []error{ErrCorrupt}},
		{"truncated", `{"format":"markov","version":1,"r":{"i":"a","n":"support","s":{`, []error{ErrCorrupt}},
		{"unknown node", `{"format":"markov","version":1,"r":{"i":"a","n":"who","s":{}}}`, []error{machine.ErrInvalidTree, executor.ErrUnknownNode}},
		{"bad state", `{"format":"markov","version":1,"r":{"i":"a","n":"support","s":{"orders":"x"}}}`, []error{machine.ErrInvalidTree, instance.ErrInvalidState}},
		{"deep tree", `{"format":"markov","version":1,"r":` + strings.Repeat(`{"i":"a","n":"review","s":{},"c":[`, MaxDepth+1) + strings.Repeat(`]}`, MaxDepth+1) + `}`, []error{ErrCorrupt, ErrLimit}},
		{"very deep", `{"format":"markov","version":1,"r":{"i":"a","n":"support","s":{"extra":` + strings.Repeat(`[`, 100000) + strings.Repeat(`]`, 100000) + `}}}`, []error{ErrCorrupt}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := UnmarshalJSON(c, []byte(tt.data))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q does not wrap %q", err, w)
				}
			}
		})
	}
}

func TestEncodeErrors(t *testing.T) {
	if _, err := Marshal(nil); !errors.Is(err, ErrEncode) {
		t.Errorf("Marshal(nil): %v", err)
	}
	if _, err := MarshalJSON(nil); !errors.Is(err, ErrEncode) {
		t.Errorf("MarshalJSON(nil): %v", err)
	}
	if _, err := Unmarshal(nil, nil); err == nil {
		t.Error("Unmarshal with a nil charter: no error")
	}
}

// TestTimesDecodeAsUTC: times in states come back in UTC whatever the
// local zone, so a restored state renders the same JSON.
func TestTimesDecodeAsUTC(t *testing.T) {
	old := time.Local
	time.Local = time.FixedZone("X", 3600)
	defer func() { time.Local = old }()
	c := charter(t)
	state := supportState{Orders: []int{}, Since: t0, Extra: map[string]any{"at": []any{t0}}}
	m, err := c.NewMachine("support", state)
	if err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(c, data)
	if err != nil {
		t.Fatal(err)
	}
	var s supportState
	access.MachineView(got, func(root *instance.Instance, _ message.History) { s = root.State.(supportState) })
	if s.Since.Location() != time.UTC {
		t.Errorf("Since in %v", s.Since.Location())
	}
	if at := s.Extra.(map[string]any)["at"].([]any)[0].(time.Time); at.Location() != time.UTC || !at.Equal(t0) {
		t.Errorf("time in an interface field: %v", at)
	}
	want, _ := json.Marshal(state)
	have, _ := json.Marshal(s)
	if !bytes.Equal(want, have) {
		t.Errorf("state renders differently:\n got %s\nwant %s", have, want)
	}
}

func TestEncodeTooDeep(t *testing.T) {
	c := charter(t)
	root := &instance.Instance{ID: "d-0", Node: "review", State: reviewState{}}
	in := root
	for i := 1; i <= MaxDepth; i++ {
		ch := &instance.Instance{ID: "d-" + strings.Repeat("x", i), Node: "review", State: reviewState{}}
		in.Children = []*instance.Instance{ch}
		in = ch
	}
	m, err := machine.Restore(c, root, message.History{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []func(*machine.Machine) ([]byte, error){Marshal, MarshalJSON, MarshalTree} {
		if _, err := f(m); !errors.Is(err, ErrEncode) || !errors.Is(err, ErrLimit) {
			t.Errorf("tree of depth %d: %v", MaxDepth+1, err)
		}
	}
	// MaxDepth levels are fine.
	in = root
	for range MaxDepth - 1 {
		in = in.Children[0]
	}
	in.Children = nil
	m, err = machine.Restore(c, root, message.History{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Unmarshal(c, data); err != nil {
		t.Fatal(err)
	}
}

func TestStoreErrors(t *testing.T) {
	c := charter(t)
	m := suspendedMachine(t)
	tree := must(MarshalTree(m))
	msg := must(MarshalMessage(m.History()[0]))
	whole := must(Marshal(m))
	js := must(MarshalJSON(m))
	// A reference to a string never numbered.
	body := appendMapLen(nil, 1)
	body = appendKey(body, "r")
	body = append(body, mpFixExt1, internExt, 7)
	dangling := seal(append(header(nil, kindMessage), body...))
	for _, tt := range []struct {
		name, contains string
		err            error
	}{
		{"machine as tree", "", errOf(Assemble(c, whole, nil))},
		{"tree as history message", "history message 1", errOf(Assemble(c, tree, [][]byte{msg, tree}))},
		{"tree as message", "", errOf(UnmarshalMessage(tree))},
		{"message as tree", "", errOf(Assemble(c, msg, nil))},
		{"dangling reference", "", errOf(UnmarshalMessage(dangling))},
		{"JSON to Unmarshal", "UnmarshalJSON", errOf(Unmarshal(c, js))},
		{"msgpack to UnmarshalJSON", "use Unmarshal", errOf(UnmarshalJSON(c, whole))},
	} {
		if !errors.Is(tt.err, ErrCorrupt) || !strings.Contains(fmt.Sprint(tt.err), tt.contains) {
			t.Errorf("%s: %v", tt.name, tt.err)
		}
	}
}

// errOf returns the error of a call.
func errOf[T any](_ T, err error) error { return err }

func TestUnknownKeysAreSkipped(t *testing.T) {
	body := appendMapLen(nil, 2)
	body = appendKey(body, "zz")
	body = append(body, deepState(3)...)
	body = appendKey(body, "r")
	body = appendStr(body, "user")
	got, err := UnmarshalMessage(seal(append(header(nil, kindMessage), body...)))
	if err != nil || got.Role != message.User {
		t.Errorf("unknown key: %v, %v", got, err)
	}
}
