package frame

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

type unmarshalCase struct {
	Name  string            `json:"name"`
	N     int               `json:"n"`
	Tags  []string          `json:"tags"`
	Sub   *unmarshalCase    `json:"sub"`
	Raw   json.RawMessage   `json:"raw"`
	Extra map[string]any    `json:"extra"`
	Kept  map[string]string `json:"kept"`
}

// TestUnmarshalAsJSON holds the pooled decoder to json.Unmarshal's
// results and errors, input after input (a decoder read before, and one
// that failed, among them).
func TestUnmarshalAsJSON(t *testing.T) {
	inputs := []string{
		`{"name":"hi"}`,
		"  {\"name\" : \"spaced\", \"n\": 3}\n\t ",
		`{"NAME":"folded","tags":["a","b"],"sub":{"name":"inner","raw":[1, 2]}}`,
		`{"raw":{"x":"\u00e9\n"},"extra":{"f":1.5,"l":[true,null]}}`,
		`{"n":"not a number","name":"after the error"}`,
		`{"kept":{"a":"1"}}`,
		`{"name":`,
		`{"name":"truncated`,
		`{"name":"ok again","n":-7}`,
		`{}`,
		`{"sub":null,"tags":[]}`,
	}
	for round := range 2 {
		for _, in := range inputs {
			var got, want unmarshalCase
			gotErr, wantErr := unmarshal([]byte(in), &got), json.Unmarshal([]byte(in), &want)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Errorf("round %d, %s: error %v, json.Unmarshal's %v", round, in, gotErr, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round %d, %s: %+v, json.Unmarshal's %+v", round, in, got, want)
			}
		}
	}
	var n, want float64
	if err := unmarshal([]byte(" 42 "), &n); err != nil || n != 42 {
		t.Errorf("a number: %v, %v", n, err)
	}
	if err, wantErr := unmarshal([]byte(`"text"`), &n), json.Unmarshal([]byte(`"text"`), &want); fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Errorf("a string into a number: %v, json.Unmarshal's %v", err, wantErr)
	}
}

// TestUnmarshalCopies holds what a decode leaves to its input's bytes
// alone: the next input, read into the same decoder's buffer, changes
// nothing decoded before.
func TestUnmarshalCopies(t *testing.T) {
	var first, second unmarshalCase
	if err := unmarshal([]byte(`{"name":"first","raw":{"a":1}}`), &first); err != nil {
		t.Fatal(err)
	}
	if err := unmarshal([]byte(`{"name":"SECOND","raw":{"b":2}}`), &second); err != nil {
		t.Fatal(err)
	}
	if first.Name != "first" || string(first.Raw) != `{"a":1}` {
		t.Errorf("first decode changed: %+v", first)
	}
}
