package serialize

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
)

// Payload forms a fuzzed resume hands over.
const (
	asRaw = iota
	asBytes
	asString
	payloadForms
)

// typedPayloadResume resumes a fresh restore of the typed scenario (data)
// with payload given in form, the tool suspension when command is false,
// the command suspension otherwise. A resume either succeeds with a
// payload the schema accepts, or fails with the machine byte-identical.
func typedPayloadResume(t *testing.T, c *machine.Charter, data, payload []byte, form byte, isError, command bool) {
	m, err := Unmarshal(c, data)
	if err != nil {
		t.Fatal(err)
	}
	id := "id-2"
	if command {
		id = "id-3"
	}
	p := payloadIn(form, payload)
	var runErr error
	for _, err := range m.Run(context.Background(), machine.ResumeInput{SuspendID: id, Payload: p, IsError: isError}) {
		if err != nil {
			runErr = err
		}
	}
	after, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if runErr != nil {
		if !errors.Is(runErr, instance.ErrPayloadDecode) {
			t.Fatalf("resume failed with %v, want an error wrapping ErrPayloadDecode", runErr)
		}
		if !bytes.Equal(data, after) {
			t.Fatalf("a rejected resume (%v) changed the machine", runErr)
		}
		return
	}
	if bytes.Equal(data, after) {
		t.Fatal("an accepted resume changed nothing")
	}
	if !isError {
		requireConfirmation(t, p)
	}
}

// payloadIn returns payload in one of the payloadForms.
func payloadIn(form byte, payload []byte) any {
	switch form % payloadForms {
	case asBytes:
		return payload
	case asString:
		return string(payload)
	}
	return json.RawMessage(payload)
}

// requireConfirmation fails unless the accepted payload p is a
// confirmation, the tool's declared payload type.
func requireConfirmation(t *testing.T, p any) {
	t.Helper()
	raw, err := instance.EncodePayload(p)
	if err != nil {
		t.Fatalf("accepted a payload that does not encode: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var v struct {
		Confirmed *bool  `json:"confirmed"`
		Comment   string `json:"comment"`
	}
	if err := dec.Decode(&v); err != nil || v.Confirmed == nil {
		t.Fatalf("accepted payload %s that is not a confirmation (%v)", raw, err)
	}
}

// FuzzResumePayload feeds arbitrary bytes as the payload of a typed resume
// (raw JSON, []byte or string; error or not; tool or command suspension):
// never a panic, and either a resume with a payload of the declared type
// or an ErrPayloadDecode with the machine byte-identical.
func FuzzResumePayload(f *testing.F) {
	c := charter(f)
	data := must(Marshal(typedMachine(f)))
	for _, seed := range []string{
		`{"confirmed":true}`, `{"confirmed":false,"comment":"no"}`, `{"confirmed":"yes"}`, `{"comment":"x"}`,
		`{"confirmed":true,"extra":1}`, `"yes"`, `yes`, ``, `null`, `[true]`, `{"confirmed":true}{}`, "\xff\xfe",
	} {
		for form := range byte(payloadForms) {
			f.Add([]byte(seed), form, false, false)
		}
		f.Add([]byte(seed), byte(asRaw), true, true)
	}
	f.Fuzz(func(t *testing.T, payload []byte, form byte, isError, command bool) {
		typedPayloadResume(t, c, data, payload, form, isError, command)
	})
}

func TestTypedResumeAfterRestore(t *testing.T) {
	c := charter(t)
	data := must(Marshal(typedMachine(t)))
	for _, tc := range []struct {
		name    string
		payload string
		form    byte
	}{
		{"bad raw", `{"confirmed":"yes"}`, asRaw},
		{"good raw", `{"confirmed":true}`, asRaw},
		{"good bytes", `{"confirmed":true,"comment":"ok"}`, asBytes},
		{"text bytes", `yes`, asBytes},
		{"string", `{"confirmed":true}`, asString},
	} {
		for _, command := range []bool{false, true} {
			t.Run(tc.name, func(t *testing.T) {
				typedPayloadResume(t, c, data, []byte(tc.payload), tc.form, false, command)
			})
		}
	}
}
