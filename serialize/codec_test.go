package serialize

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// The hand-written msgpack codec must agree with the wire structs: the
// bytes it writes are the bytes the msgpack library writes for the
// structs (pinned configuration), and the library reads them back into the
// same structs.

// toWire converts a machine to the wire structs of the msgpack form.
func toWire(c *machine.Charter, root *instance.Instance, history []message.Message) (*wireMachine, error) {
	e := &encoder{c: c, form: msgpackStates{}}
	var w wireMachine
	e.toWireMachine(&machineModel{Root: root, History: history}, &w)
	return &w, e.err
}

// fromWire converts the wire structs back.
func fromWire(c *machine.Charter, w *wireMachine) (*instance.Instance, []message.Message, error) {
	d := decoder{c: c}
	var m machineModel
	err := d.fromWireMachine(w, &m)
	return m.Root, m.History, err
}

// reflective encodes v with the msgpack library and the pinned
// configuration.
func reflective(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := newEncoder()
	enc.ResetWriter(&buf)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func checkCodec(t *testing.T, name string, m *machine.Machine) {
	t.Helper()
	data, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var w *wireMachine
	access.MachineView(m, func(root *instance.Instance, history message.History) {
		w, err = toWire(m.Charter(), root, history.Messages())
	})
	if err != nil {
		t.Fatal(err)
	}
	want := reflective(t, w)
	if !bytes.Equal(data[headerSize:], want) {
		t.Fatalf("%s: hand-written encoding differs from the wire structs':\n got %x\nwant %x", name, data[headerSize:], want)
	}

	// The library reads the bytes back into the wire structs, and those
	// convert to the machine the hand-written decoder gives.
	var back wireMachine
	dec := newDecoder()
	dec.ResetReader(bytes.NewReader(data[headerSize:]))
	if err := dec.Decode(&back); err != nil {
		t.Fatal(err)
	}
	root, history, err := fromWire(m.Charter(), &back)
	if err != nil {
		t.Fatal(err)
	}
	got, err := machine.Restore(m.Charter(), root, message.NewHistory(history))
	if err != nil {
		t.Fatal(err)
	}
	sameMachine(t, m, got)
}

func TestCodecMatchesWireStructs(t *testing.T) {
	for _, sc := range scenarios {
		checkCodec(t, sc.name, sc.build(t))
	}
	checkCodec(t, "kitchen sink", kitchenSink(t))
	c := charter(t)
	for seed := range uint64(200) {
		m, err := newGen(seed, false).machine(c)
		if err != nil {
			t.Fatal(err)
		}
		checkCodec(t, "random", m)
	}
}

func TestMessageCodecMatchesWireStructs(t *testing.T) {
	g := newGen(1, false)
	for range 200 {
		msg := g.message()
		b, err := MarshalMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		var w wireMessage
		(&encoder{form: msgpackStates{}}).toWireMessage(&msg, &w)
		if want := reflective(t, &w); !bytes.Equal(b[headerSize:], want) {
			t.Fatalf("got %x\nwant %x", b[headerSize:], want)
		}
	}
}

// TestIntsMatchLibrary checks the integer writer and reader on boundary
// values.
func TestIntsMatchLibrary(t *testing.T) {
	ints := []int64{0, 1, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, 1<<63 - 1, -1, -32, -33, -128, -129, -32768, -32769, -1 << 31, -1<<31 - 1, -1 << 63}
	for _, n := range ints {
		got := appendInt(nil, n)
		if want := reflective(t, n); !bytes.Equal(got, want) {
			t.Errorf("int %d: got %x want %x", n, got, want)
		}
		v, err := newReader(got).int()
		if err != nil || v != n {
			t.Errorf("int %d read back as %d, %v", n, v, err)
		}
	}
}

// TestLengthsMatchLibrary checks the length headers of strings, bytes
// and arrays on boundary values.
func TestLengthsMatchLibrary(t *testing.T) {
	for _, l := range []int{0, 31, 32, 255, 256, 65535, 65536} {
		s := string(bytes.Repeat([]byte("x"), l))
		p := []byte(s)
		for _, c := range []struct {
			what      string
			got, want []byte
		}{
			{"str", appendStr(nil, s), reflective(t, s)},
			{"bin", appendBin(nil, p), reflective(t, p)},
			{"array", appendArrayLen(nil, l), reflective(t, make([]bool, l))[:len(appendArrayLen(nil, l))]},
		} {
			if !bytes.Equal(c.got, c.want) {
				t.Errorf("%s of %d: got %x want %x", c.what, l, c.got[:min(8, len(c.got))], c.want[:min(8, len(c.want))])
			}
		}
		r := newReader(appendStr(nil, s))
		if v, err := r.string(); err != nil || v != s {
			t.Errorf("str of %d read back wrong: %v", l, err)
		}
	}
}

// TestTimesMatchLibrary checks the timestamp writer and reader.
func TestTimesMatchLibrary(t *testing.T) {
	g := newGen(3, false)
	for range 100 {
		tm := g.time()
		if tm.IsZero() {
			continue
		}
		if got, want := appendTime(nil, tm), reflective(t, tm); !bytes.Equal(got, want) {
			t.Errorf("time %v: got %x want %x", tm, got, want)
		}
		back, err := newReader(appendTime(nil, tm)).time()
		if err != nil || !back.Equal(tm) || back.Location() != tm.Location() {
			t.Errorf("time %v read back as %v, %v", tm, back, err)
		}
	}
}

// TestStatesMatchJSONNames checks the pinned configuration: struct fields
// encode by their JSON names, map keys sorted.
func TestStatesMatchJSONNames(t *testing.T) {
	b, err := appendState(nil, supportState{Orders: []int{1}, Tags: map[string]string{"b": "2", "a": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := msgpack.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"orders", "since", "tags"} {
		if _, ok := m[k]; !ok {
			t.Errorf("state lacks key %q: %v", k, m)
		}
	}
	if !bytes.Contains(b, []byte("\xa1a\xa11\xa1b\xa12")) {
		t.Errorf("map keys not sorted: %x", b)
	}
}

func TestStateStorage(t *testing.T) {
	type omitAny struct {
		V any `json:"v,omitempty"`
	}
	type tagged struct {
		V any `msgpack:"v" json:"v,omitempty"`
	}
	type text struct{ T time.Time }
	tests := []struct {
		typ    reflect.Type
		asJSON bool
	}{
		{reflect.TypeFor[supportState](), false},
		{reflect.TypeFor[reviewState](), false},
		{reflect.TypeFor[vaultState](), true},
		{reflect.TypeFor[auditState](), true},
		{reflect.TypeFor[map[string][]*vaultState](), true},
		// msgpack omits an interface holding false that JSON keeps.
		{reflect.TypeFor[omitAny](), true},
		{reflect.TypeFor[tagged](), false},
		{reflect.TypeFor[text](), false},
		{reflect.TypeFor[json.RawMessage](), false},
		{reflect.TypeFor[any](), false},
	}
	for _, tt := range tests {
		if got := codecFor(tt.typ).asJSON; got != tt.asJSON {
			t.Errorf("%s: stored as JSON %v, want %v", tt.typ, got, tt.asJSON)
		}
	}
	// The omitempty interface keeps its false.
	b, err := encodeJSON(omitAny{V: false})
	if err != nil {
		t.Fatal(err)
	}
	v, err := codecFor(reflect.TypeFor[omitAny]()).decodeJSON(b)
	if err != nil || v != (omitAny{V: false}) {
		t.Errorf("got %#v, %v", v, err)
	}
}

// TestInterfaceValues: values decoded into interface fields take the
// shapes JSON gives them (string map keys), with integers kept integers.
func TestInterfaceValues(t *testing.T) {
	in := map[string]any{"ints": map[int]string{1: "a", -2: "b"}, "n": 3, "f": 1.5, "s": []string{"x"}}
	b, err := appendState(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := codecFor(reflect.TypeFor[any]()).decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"ints": map[string]any{"1": "a", "-2": "b"}, "n": int64(3), "f": 1.5, "s": []any{"x"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
