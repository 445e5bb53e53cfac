package fleet

import (
	"encoding/json"
	"errors"
	"testing"

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
		{inResume, entry{SuspendID: "s1", Payload: json.RawMessage(`{"ok":true}`), IsError: true, FreshTurn: true}},
		{inCancel, entry{SuspendID: "s1", Reason: "gone"}},
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
