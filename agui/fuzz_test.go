package agui_test

import (
	"errors"
	"testing"

	"github.com/markov-agents/markov/agui"
	"github.com/markov-agents/markov/store"
)

// FuzzDecodeInput: any body decodes to a runnable input or fails with
// ErrInvalidInput, never panics; what it accepts names a valid thread, a
// run, and resume entries with an interrupt and a known status.
func FuzzDecodeInput(f *testing.F) {
	for _, seed := range []string{
		`{"threadId":"t1","runId":"r1","messages":[{"id":"m","role":"user","content":"hi"}]}`,
		`{"threadId":"t1","runId":"r1","messages":[],"resume":[{"interruptId":"s1","status":"resolved","payload":{"approved":true}}]}`,
		`{"threadId":"t1","runId":"r1","messages":[],"resume":[{"interruptId":"s1","status":"cancelled"}]}`,
		`{"thread_id":"t1","run_id":"r1","messages":[{"id":"m","role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		`{"threadId":"","runId":"r"}`,
		`{"threadId":"t\u0000","runId":"r"}`,
		`{"threadId":"t","runId":"r","resume":[{"interruptId":"","status":"resolved"}]}`,
		`{"threadId":"t","runId":"r","resume":{}}`,
		`[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := agui.DecodeInput(body)
		if err != nil {
			if !errors.Is(err, agui.ErrInvalidInput) {
				t.Fatalf("error %v does not wrap ErrInvalidInput", err)
			}
			return
		}
		if !store.ValidID(in.ThreadID) || in.RunID == "" {
			t.Fatalf("accepted thread %q, run %q", in.ThreadID, in.RunID)
		}
		for _, e := range in.Resume {
			if e.InterruptID == "" || e.Status != "resolved" && e.Status != "cancelled" {
				t.Fatalf("accepted resume entry %+v", e)
			}
		}
	})
}
