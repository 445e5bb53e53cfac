package frame

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

type acceptLeaf struct {
	Name string `json:"name"`
	N    int8   `json:"n,omitempty"`
}

type acceptIn struct {
	Text   string         `json:"text"`
	Count  int            `json:"count"`
	Small  uint8          `json:"small"`
	Ratio  float64        `json:"ratio"`
	OK     bool           `json:"ok"`
	Opt    *string        `json:"opt"`
	List   []int          `json:"list"`
	Pair   [2]string      `json:"pair"`
	Labels map[string]int `json:"labels"`
	Leaf   acceptLeaf     `json:"leaf"`
	Leaves []acceptLeaf   `json:"leaves,omitempty"`
	Extra  any            `json:"extra,omitempty"`
}

const acceptValid = `{"text":"hi","count":3,"small":255,"ratio":0.5,"ok":true,"opt":null,"list":[1,2],` +
	`"pair":["a","b"],"labels":{"x":1},"leaf":{"name":"l","n":-128},"leaves":[{"name":"m"}],"extra":[{"any":null}]}`

// acceptCases are inputs on both sides of every keyword the acceptor knows.
var acceptCases = []string{
	acceptValid,
	`{}`,
	`{"text":"hi"}`,
	`[]`,
	`"text"`,
	`null`,
	`{"text":"hi","count":3,"small":255,"ratio":1,"ok":false,"opt":"o","list":null,"pair":["a","b"],"labels":{},"leaf":{"name":""}}`,
	`{"text":1,"count":3,"small":255,"ratio":0.5,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"l"}}`,
	`{"text":"hi","count":1.5,"small":255,"ratio":0.5,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"l"}}`,
	`{"text":"hi","count":3,"small":256,"ratio":0.5,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"l"}}`,
	`{"text":"hi","count":3,"small":-1,"ratio":0.5,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"l"}}`,
	`{"text":"hi","count":3,"small":1,"ratio":"0.5","ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"l"}}`,
	`{"text":"hi","count":3,"small":1,"ratio":0.5,"ok":1,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"l"}}`,
	`{"text":"hi","count":3,"small":1,"ratio":0.5,"ok":true,"opt":2,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"l"}}`,
	`{"text":"hi","count":3,"small":1,"ratio":0.5,"ok":true,"opt":null,"list":[1.5],"pair":["a","b"],"labels":{},"leaf":{"name":"l"}}`,
	`{"text":"hi","count":3,"small":1,"ratio":0.5,"ok":true,"opt":null,"list":[],"pair":["a"],"labels":{},"leaf":{"name":"l"}}`,
	`{"text":"hi","count":3,"small":1,"ratio":0.5,"ok":true,"opt":null,"list":[],"pair":["a","b","c"],"labels":{},"leaf":{"name":"l"}}`,
	`{"text":"hi","count":3,"small":1,"ratio":0.5,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{"x":"1"},"leaf":{"name":"l"}}`,
	`{"text":"hi","count":3,"small":1,"ratio":0.5,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{}}`,
	`{"text":"hi","count":3,"small":1,"ratio":0.5,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"l","n":128}}`,
	`{"text":"hi","count":3,"small":1,"ratio":0.5,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"l","more":1}}`,
	`{"text":"hi","count":3,"small":1,"ratio":0.5,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"l"},"leaves":[{}]}`,
	`{"text":"hi","count":3,"small":1,"ratio":0.5,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"l"},"unknown":0}`,
	`{"text":"hi","count":3,"small":1,"ratio":0.5,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":null,"leaf":{"name":"l"}}`,
}

// TestAcceptorAgreesWithValidator checks the fast path against the full
// validator: for inferred input schemas it accepts exactly the valid
// values, so it never lets through what the validator refuses, and valid
// input never pays for the full validator.
func TestAcceptorAgreesWithValidator(t *testing.T) {
	s, err := SchemaFor[acceptIn]()
	if err != nil {
		t.Fatal(err)
	}
	if s.accept == nil {
		t.Fatal("no acceptor for an inferred struct schema")
	}
	for _, in := range acceptCases {
		checkAcceptor(t, s, in)
	}
}

func FuzzAcceptor(f *testing.F) {
	for _, in := range acceptCases {
		f.Add(in)
	}
	s, err := SchemaFor[acceptIn]()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) { checkAcceptor(t, s, in) })
}

func checkAcceptor(t *testing.T, s *Schema, in string) {
	t.Helper()
	var v any
	if json.Unmarshal([]byte(in), &v) != nil {
		return
	}
	verr := s.resolved.Validate(v)
	if got := s.accept.accepts(v); got != (verr == nil) {
		t.Errorf("%s: acceptor says %v, validator says %v", in, got, verr)
	}
	checkRaw(t, s, in)
}

// checkRaw checks the raw fast path against the full validator: what it
// accepts is JSON the validator accepts.
func checkRaw(t *testing.T, s *Schema, in string) {
	t.Helper()
	if !s.accept.acceptsRaw([]byte(in)) {
		return
	}
	var v any
	if err := json.Unmarshal([]byte(in), &v); err != nil {
		t.Fatalf("%q: raw acceptor accepts JSON that does not decode: %v", in, err)
	}
	if err := s.resolved.Validate(v); err != nil {
		t.Errorf("%q: raw acceptor accepts what the validator refuses: %v", in, err)
	}
}

// TestRawAcceptor checks the raw fast path on every case, on JSON it must
// leave to the long way, and that it takes the valid cases (otherwise it
// would be no fast path).
func TestRawAcceptor(t *testing.T) {
	s, err := SchemaFor[acceptIn]()
	if err != nil {
		t.Fatal(err)
	}
	odd := []string{
		acceptValid + " ", " " + acceptValid, acceptValid + "x", `{"text":"h\u00e9\n"}`, `{"te\u0078t":"hi"}`,
		`{"text":"hi",}`, `{"text" "hi"}`, `{"count":01}`, `{"count":1.}`, `{"count":-}`, `{"count":1e}`, `{"count":1e400}`,
		`{"count":1.0}`, `{"count":2E+1}`, `{"list":[1,]}`, `{"list":[1 2]}`, `{"text":"a` + "\x01" + `"}`, `{"text":"\q"}`,
		`{"text":"\u12"}`, `{"extra":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, `{"ok":tru}`, `{"opt":nul}`, `{`, `[`, `"`,
	}
	for _, in := range append(slices.Clone(acceptCases), odd...) {
		checkRaw(t, s, in)
	}
	for _, in := range []string{acceptValid, `{"text":"hi","count":3,"small":255,"ratio":1,"ok":false,"opt":"o","list":null,"pair":["a","b"],"labels":{},"leaf":{"name":""}}`} {
		if !s.accept.acceptsRaw([]byte(in)) {
			t.Errorf("%s: valid input not taken by the raw path", in)
		}
	}
}

// TestAcceptorDefersUnknownKeywords checks that a schema with a keyword
// the acceptor does not know is left to the full validator.
func TestAcceptorDefersUnknownKeywords(t *testing.T) {
	for _, raw := range []string{
		`{"type":"object","properties":{"s":{"type":"string","pattern":"^a"}}}`,
		`{"type":"object","properties":{"s":{"enum":["a"]}}}`,
		`{"anyOf":[{"type":"string"}]}`,
		`{"not":{"type":"string"}}`,
		`{"$defs":{"x":{"type":"string"}},"$ref":"#/$defs/x"}`,
	} {
		s, err := ParseSchema(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if s.accept != nil {
			t.Errorf("%s: acceptor built for a schema it cannot check", raw)
		}
		if err := s.Validate(json.RawMessage(`{"s":"b"}`)); raw != `{"not":{"type":"string"}}` && err == nil {
			t.Errorf("%s: invalid value accepted", raw)
		}
	}
}

// TestDecodeAllocs keeps decoding valid input cheap: through the full
// validator it allocates 41 times, through the acceptor 14, through the
// raw acceptor (decoded once) 6, with a pooled decoder 2 (the value and
// its string).
func TestDecodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates too, and drops pooled values")
	}
	s, err := SchemaFor[acceptLeaf]()
	if err != nil {
		t.Fatal(err)
	}
	data := json.RawMessage(`{"name":"hi"}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Decode[acceptLeaf](s, data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("Decode allocates %v times, want at most 2", allocs)
	}
}
