package frame

import (
	"testing"

	"github.com/markov-agents/markov/instance"
)

// FuzzEnded: a journal entry, whatever its status and result bytes,
// reads as an outcome without panicking — done, its result decoded or an
// error with the zero result; failed, an error; anything else, not ended.
func FuzzEnded(f *testing.F) {
	for _, seed := range []struct{ status, result string }{
		{instance.EffectDone, `{"seat":7,"rows":1}`},
		{instance.EffectDone, `{"seat":"7"}`},
		{instance.EffectDone, ``},
		{instance.EffectFailed, `seat taken`},
		{instance.EffectStarted, ``},
		{"", `null`},
	} {
		f.Add(seed.status, []byte(seed.result))
	}
	type booking struct {
		Seat int `json:"seat"`
		Rows int `json:"rows"`
	}
	f.Fuzz(func(t *testing.T, status string, result []byte) {
		out, ok, err := ended[booking]("book", instance.JournalEntry{Status: status, Result: result})
		switch status {
		case instance.EffectDone, instance.EffectFailed:
			if !ok {
				t.Fatalf("a %s entry did not end", status)
			}
		default:
			if ok || err != nil {
				t.Fatalf("a %q entry ended: %v", status, err)
			}
		}
		if err != nil && out != (booking{}) {
			t.Fatalf("an error with a result: %+v, %v", out, err)
		}
		if status == instance.EffectFailed && err == nil {
			t.Fatal("a failed entry without an error")
		}
	})
}
