package console

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

const verdictSchema = `{"type":"object","properties":{"approved":{"type":"boolean"},"note":{"type":"string","description":"why"},` +
	`"amount":{"type":"integer"},"rate":{"type":["null","number"]},"level":{"enum":["low","high"]},"tags":{"type":"array","items":{"type":"string"}}},` +
	`"required":["approved","amount"]}`

func TestNewForm(t *testing.T) {
	f := newForm(json.RawMessage(verdictSchema))
	require.True(t, f.Object)
	require.Equal(t, "approved", f.YesNo)
	kinds := map[string]string{}
	for _, fl := range f.Fields {
		kinds[fl.Name] = fl.Kind
	}
	require.Empty(t, cmp.Diff(map[string]string{"amount": kindInteger, "approved": kindBoolean, "level": kindEnum,
		"note": kindString, "rate": kindNumber, "tags": kindJSON}, kinds))
	var names []string
	for _, fl := range f.Fields {
		names = append(names, fl.Name)
		if fl.Name == "level" {
			require.Equal(t, []string{`"low"`, `"high"`}, fl.Options)
		}
	}
	require.Equal(t, []string{"approved", "note", "amount", "rate", "level", "tags"}, names, "the schema's order, not the alphabet's")

	require.Equal(t, "value", newForm(json.RawMessage(`{"type":"boolean"}`)).YesNo)
	require.Equal(t, kindText, newForm(nil).Fields[0].Kind)
	require.Equal(t, kindText, newForm(json.RawMessage(`{nope`)).Fields[0].Kind)
}

func TestDecode(t *testing.T) {
	f := newForm(json.RawMessage(verdictSchema))
	tests := []struct {
		name string
		in   url.Values
		want string
		err  bool
	}{
		{"approve shortcut", url.Values{"_decision": {"true"}, "amount": {"5"}}, `{"amount":5,"approved":true}`, false},
		{"reject shortcut overrides the box", url.Values{"_decision": {"false"}, "approved": {"on"}, "amount": {"5"}}, `{"amount":5,"approved":false}`, false},
		{"every field", url.Values{"approved": {"on"}, "amount": {" 7 "}, "note": {"ok"}, "rate": {"0.5"}, "level": {`"high"`}, "tags": {`["a"]`}},
			`{"amount":7,"approved":true,"level":"high","note":"ok","rate":0.5,"tags":["a"]}`, false},
		{"missing required", url.Values{}, "", true},
		{"not a number", url.Values{"amount": {"x"}}, "", true},
		{"not an option", url.Values{"amount": {"1"}, "level": {`"mid"`}}, "", true},
		{"bad JSON", url.Values{"amount": {"1"}, "tags": {"[a"}}, "", true},
	}
	// A required text field left blank is refused (the console's rule).
	text := newForm(json.RawMessage(`{"type":"object","properties":{"manager":{"type":"string"}},"required":["manager"]}`))
	for _, blank := range []string{"", "  "} {
		_, err := text.decode(url.Values{"manager": {blank}})
		require.ErrorIs(t, err, ErrFormValue, "blank %q", blank)
	}
	got, err := text.decode(url.Values{"manager": {"dana"}})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"manager": "dana"}, got)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.decode(tt.in)
			if tt.err {
				require.ErrorIs(t, err, ErrFormValue)
				return
			}
			require.NoError(t, err)
			b, err := json.Marshal(got)
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(b))
		})
	}
}

// FuzzDecode feeds arbitrary schemas and form values to the form path:
// never a panic, an error is ErrFormValue, and a payload encodes as JSON.
func FuzzDecode(f *testing.F) {
	f.Add(verdictSchema, "approved=on&amount=3&tags=%5B%5D")
	f.Add(`{"type":"integer"}`, "value=12")
	f.Add(``, "value=hello")
	f.Add(`{"type":"object","properties":{"x":{"enum":[1,{"a":2}]}}}`, "x=1")
	f.Fuzz(func(t *testing.T, schema, query string) {
		form := newForm(json.RawMessage(schema))
		values, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		for _, decode := range []func(url.Values) (any, error){form.decode, form.decodeReject} {
			payload, err := decode(values)
			if err != nil {
				if !errors.Is(err, ErrFormValue) {
					t.Fatalf("error %v is not ErrFormValue", err)
				}
				if fe, ok := errors.AsType[*FieldError](err); !ok {
					t.Fatalf("error %v is not a *FieldError", err)
				} else if _, at := form.withError(fe.Field, fe.Message); !at && fe.Field != valueField {
					t.Fatalf("error %v names no field of the form", err)
				}
				continue
			}
			if _, err := json.Marshal(payload); err != nil {
				t.Fatalf("payload %#v does not encode: %v", payload, err)
			}
		}
		_ = form.withValues(values)
	})
}

// TestDecodeReject: Reject sets the yes-no field false, needs no other
// field, gives required ones left blank their zero value and still
// refuses a value that is not one.
func TestDecodeReject(t *testing.T) {
	f := newForm(json.RawMessage(verdictSchema))
	got, err := f.decodeReject(url.Values{"approved": {"on"}})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"approved": false, "amount": 0}, got)
	got, err = f.decodeReject(url.Values{"amount": {"3"}, "note": {"no"}})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"approved": false, "amount": int64(3), "note": "no"}, got)
	_, err = f.decodeReject(url.Values{"amount": {"x"}})
	require.ErrorIs(t, err, ErrFormValue)
	_, err = newForm(json.RawMessage(`{"type":"object","properties":{"n":{"type":"string"}}}`)).decodeReject(url.Values{})
	require.ErrorIs(t, err, ErrFormValue, "no yes-no field: nothing to reject")
	got, err = newForm(json.RawMessage(`{"type":"boolean"}`)).decodeReject(url.Values{})
	require.NoError(t, err)
	require.Equal(t, false, got)
}

// TestLayout: an input laid out by its schema — the schema's order, then
// the others as written; titles as labels; amounts, dates, lists and
// booleans for people.
func TestLayout(t *testing.T) {
	schema := `{"type":"object","properties":{"z":{"type":"integer","title":"Amount"},"a":{"type":"string","format":"date"}}}`
	got := layout(json.RawMessage(`{"extra":[1,"b"],"a":"2026-12-01","z":-1234567.5,"ok":true,"when":"2026-11-29T14:05:00Z","deep":{"k":1}}`), json.RawMessage(schema))
	var lines []string
	for _, it := range got {
		lines = append(lines, it.Label+"="+it.Value)
	}
	require.Equal(t, []string{"Amount=-1,234,567.5", "a=Tue 1 Dec 2026", "extra=1, b", "ok=yes", "when=Sun 29 Nov 2026, 14:05 UTC", "deep={\n  \"k\": 1\n}"}, lines)
	require.True(t, got[5].Block)
	require.Equal(t, []item{{Name: "input", Label: "input", Value: "12"}}, layout(json.RawMessage(`12`), nil))
	require.Nil(t, layout(nil, nil))
}

// FuzzLayout: any input and schema lay out without a panic, each key of
// an object once.
func FuzzLayout(f *testing.F) {
	f.Add(`{"a":1,"b":"2026-01-02"}`, verdictSchema)
	f.Add(`[1,2]`, ``)
	f.Add(`{"a":{"b":[null]},"a":2}`, `{"properties":{"a":{"title":"A"}}}`)
	f.Add(`-0.5e10`, `{"type":"number"}`)
	f.Fuzz(func(t *testing.T, raw, schema string) {
		items := layout(json.RawMessage(raw), json.RawMessage(schema))
		seen := map[string]bool{}
		for _, it := range items {
			if seen[it.Name] {
				t.Fatalf("%q laid out twice", it.Name)
			}
			seen[it.Name] = true
		}
	})
}
