package resumehttp

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/store"
)

// FuzzSuspendRequest feeds POST /machines/{id}/suspend any body: decoding
// and suspendOptions never panic, and a refused request wraps
// durable.ErrInvalidSuspend.
func FuzzSuspendRequest(f *testing.F) {
	for _, s := range []string{`{}`, `{"mode":"finish_step"}`, `{"mode":"wait_for_completion","no_wait":true}`,
		`{"reason":"r","resume_when":{"on_event":"ci.passed"}}`,
		`{"resume_when":{"timeout":{"duration_minutes":30,"on_timeout":"resume_with_summary"}}}`,
		`{"resume_when":{"timeout":{"duration_minutes":0.5,"on_timeout":"resume_with_input","input":{"a":1}}}}`,
		`{"resume_when":{"timeout":{"duration_minutes":-1}}}`, `{"mode":"x"}`, `{"resume_when":{"on_event":"\u0007"}}`,
		`{"resume_when":{"timeout":{"duration_minutes":1e308}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req SuspendRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		opts, err := suspendOptions(req)
		if err != nil {
			if !errors.Is(err, durable.ErrInvalidSuspend) {
				t.Fatalf("suspendOptions(%s): %v, want ErrInvalidSuspend", body, err)
			}
			return
		}
		if len(opts) == 0 {
			t.Fatalf("suspendOptions(%s) returned no options", body)
		}
	})
}

// FuzzEventName feeds POST /events/{name} any name: an event name
// instance.CheckEvent accepts is one every store can keep.
func FuzzEventName(f *testing.F) {
	for _, s := range []string{"ci.passed", "file.changed:src/lib.rs", "", "a\x00b", "\xff", "tab\there", "ünïcode"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := instance.CheckEvent(name)
		if err != nil {
			if !errors.Is(err, instance.ErrInvalidEvent) {
				t.Fatalf("CheckEvent(%q): %v", name, err)
			}
			return
		}
		if !store.ValidID(name) {
			t.Fatalf("CheckEvent(%q) accepts a name stores refuse", name)
		}
	})
}
