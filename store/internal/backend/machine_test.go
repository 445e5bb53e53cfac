package backend

import (
	"reflect"
	"testing"

	"github.com/markov-agents/markov/store"
)

// FuzzDecodeMachineChange checks that DecodeMachineChange, given a feed
// row's machine column whatever its bytes, returns a change or an error
// and never panics, and that a change it decodes encodes and decodes to
// itself; NULL is a suspension change (nil, no error).
func FuzzDecodeMachineChange(f *testing.F) {
	for _, c := range []store.MachineChange{
		{Event: store.MachineFinished, Revision: 7, Answer: "done ✓"},
		{Event: store.MachineParked, Revision: 3, Errors: []string{"a", "b"}},
	} {
		b, err := EncodeMachineChange(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"Event":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := DecodeMachineChange(raw)
		if err != nil || c == nil {
			return
		}
		b, err := EncodeMachineChange(*c)
		if err != nil {
			t.Fatalf("encode %+v: %v", c, err)
		}
		again, err := DecodeMachineChange(b)
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip of %+v = %+v, %v", c, again, err)
		}
	})
	if c, err := DecodeMachineChange(nil); c != nil || err != nil {
		f.Fatalf("DecodeMachineChange(nil) = %+v, %v; want a suspension change", c, err)
	}
}

// Parked keeps the latest store.MaxParkedErrors errors, oldest first.
func TestParked(t *testing.T) {
	var errs []string
	for i := range store.MaxParkedErrors + 2 {
		errs = Parked(errs, string(rune('a'+i)))
	}
	if len(errs) != store.MaxParkedErrors || errs[0] != "c" || errs[len(errs)-1] != string(rune('a'+store.MaxParkedErrors+1)) {
		t.Fatalf("Parked kept %q", errs)
	}
}
