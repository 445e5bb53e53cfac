package store_test

import (
	"errors"
	"testing"

	"github.com/markov-agents/markov/store"
)

// FuzzParseStatus: ParseStatus accepts exactly the four statuses, and
// refuses anything else with ErrUnknownStatus and ErrInvalid; a filter or
// a save with the value agrees.
func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{"pending", "resolved", "expired", "cancelled", "", "Pending", "canceled", "timed_out", "pending\x00", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := store.ParseStatus(s)
		valid := false
		for _, known := range store.Statuses() {
			valid = valid || string(known) == s
		}
		if valid != (err == nil) || (err == nil && string(st) != s) {
			t.Fatalf("ParseStatus(%q) = %q, %v; valid = %v", s, st, err, valid)
		}
		if err != nil && (!errors.Is(err, store.ErrUnknownStatus) || !errors.Is(err, store.ErrInvalid)) {
			t.Fatalf("ParseStatus(%q) error %v does not wrap ErrUnknownStatus and ErrInvalid", s, err)
		}
		if ferr := (store.Filter{Status: store.Status(s)}).Validate(); (ferr == nil) != (valid || s == "") {
			t.Fatalf("Filter{Status: %q}.Validate() = %v", s, ferr)
		}
		sv := store.Save{MachineID: "m", Suspensions: []store.Suspension{{ID: "s", Status: store.Status(s)}}}
		if serr := sv.Validate(); (serr == nil) != valid {
			t.Fatalf("Save with status %q: Validate() = %v", s, serr)
		}
	})
}
