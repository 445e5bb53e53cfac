package fleet

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/serialize"
)

// FuzzDecodeEntry decodes fuzzed inbox rows, a kind and a JSON body, as
// the run job reads them back from the database: a row that does not
// decode is an error wrapping ErrCorruptInbox (the job drops it), and one
// that does is the machine input of its kind.
func FuzzDecodeEntry(f *testing.F) {
	msg, err := serialize.MarshalMessage(message.Message{Role: message.User, Parts: []message.Part{{Kind: message.KindText, Text: "hi"}}})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []struct {
		kind string
		e    entry
	}{
		{inResume, entry{SuspendID: "s1", Payload: json.RawMessage(`{"ok":true}`), IsError: true, FreshTurn: true, By: "dana"}},
		{inCancel, entry{SuspendID: "s1", Reason: "gone", By: "dana"}},
		{inCommand, entry{Command: "bump", Input: json.RawMessage(`{"by":1}`), InstanceID: "i", Invocation: "k"}},
		{inMessage, entry{Message: msg}},
		{inMessage, entry{Message: msg[:len(msg)/2]}},
		{inSignal, entry{SuspendID: "s1", Event: "ci.passed", Payload: json.RawMessage(`1`)}},
		{"unknown", entry{}},
	} {
		body, err := json.Marshal(seed.e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seed.kind, body)
	}
	f.Add(inMessage, []byte(`{"message":"bm90IGEgbWVzc2FnZQ=="}`))
	f.Add(inResume, []byte(`{"payload":`))
	f.Add(inCommand, []byte(`[]`))
	f.Fuzz(func(t *testing.T, kind string, body []byte) {
		var e entry
		in, err := decodeEntry(kind, body, &e)
		if err != nil {
			if !errors.Is(err, ErrCorruptInbox) {
				t.Fatalf("decodeEntry(%q, %q): %v does not wrap ErrCorruptInbox", kind, body, err)
			}
			return
		}
		var ok bool
		switch kind {
		case inResume:
			_, ok = in.(machine.ResumeInput)
		case inCancel:
			_, ok = in.(machine.CancelInput)
		case inCommand:
			_, ok = in.(command.Invocation)
		case inMessage:
			_, ok = in.(message.Message)
		case inSignal:
			_, ok = in.(machine.SignalInput)
		}
		if !ok {
			t.Fatalf("decodeEntry(%q, %q) = %T", kind, body, in)
		}
	})
}

// TestEntryKeepsBy checks that who decided (ResumeInput.By,
// CancelInput.By) crosses the inbox.
func TestEntryKeepsBy(t *testing.T) {
	for kind, e := range map[string]entry{inResume: {SuspendID: "s1", By: "dana"}, inCancel: {SuspendID: "s1", By: "dana"}} {
		body, err := json.Marshal(e)
		require.NoError(t, err)
		var got entry
		in, err := decodeEntry(kind, body, &got)
		require.NoError(t, err)
		switch in := in.(type) {
		case machine.ResumeInput:
			require.Equal(t, "dana", in.By)
		case machine.CancelInput:
			require.Equal(t, "dana", in.By)
		default:
			t.Fatalf("%s: %T", kind, in)
		}
	}
}
