package a2a

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/markov-agents/markov/internal/bridge"
)

// FuzzAnswers feeds messages, as a client sends them on the wire, to the
// mapping of a message on a task to the bridge's answers: it never
// panics, refuses with ErrBadAnswer or ErrDecidedElsewhere, and every
// answer it gives names a suspension the task waits on, with a JSON
// payload when it accepts.
func FuzzAnswers(f *testing.F) {
	for _, seed := range []string{
		`{"messageId":"m","role":"ROLE_USER","parts":[{"text":"blue"}]}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[{"data":{"qty":3}}]}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[{"data":{"qty":3},"metadata":{"suspendId":"s2"}}]}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[{"text":"no","metadata":{"suspendId":"s1","action":"decline"}}]}`,
		`{"messageId":"m","role":"ROLE_USER","metadata":{"suspendId":"s3"},"parts":[{"text":"go"}]}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[{"url":"https://example.com/f"}]}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a","metadata":{"suspendId":7}}]}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[]}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[null]}`,
	} {
		f.Add([]byte(seed), 1)
		f.Add([]byte(seed), 3)
	}
	all := []bridge.Request{
		{SuspendID: "s1", Schema: json.RawMessage(`{"type":"string"}`)},
		{SuspendID: "s2", Schema: json.RawMessage(`{"type":"object"}`)},
		{SuspendID: "s3", Metadata: json.RawMessage(`{"decided_elsewhere":true}`)},
	}
	f.Fuzz(func(t *testing.T, raw []byte, n int) {
		var msg a2a.Message
		if json.Unmarshal(raw, &msg) != nil {
			return
		}
		waiting := all[:max(1, min(len(all), n))]
		as, err := answers(&msg, waiting)
		if err != nil {
			if !errors.Is(err, ErrBadAnswer) && !errors.Is(err, ErrDecidedElsewhere) {
				t.Fatalf("answers: %v, want ErrBadAnswer or ErrDecidedElsewhere", err)
			}
			return
		}
		if len(as) != len(msg.Parts) {
			t.Fatalf("%d answers for %d parts", len(as), len(msg.Parts))
		}
		for _, a := range as {
			if (a.Action == "" || a.Action == bridge.Accept) && !json.Valid(a.Payload) {
				t.Fatalf("answer %+v: the payload is not JSON", a)
			}
			if a.SuspendID == "" {
				t.Fatalf("answer %+v names no suspension", a)
			}
			// A stranger is the bridge's to refuse (ErrNotInToken).
			k := slices.IndexFunc(waiting, func(r bridge.Request) bool { return r.SuspendID == a.SuspendID })
			if k >= 0 && elsewhere(waiting[k]) {
				t.Fatalf("answer to %s, which is decided elsewhere", a.SuspendID)
			}
		}
	})
}
