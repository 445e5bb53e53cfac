package machine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// inputErrors are the sentinels a Run's error for bad input wraps.
var inputErrors = []error{
	machine.ErrBadInput, machine.ErrDeadlinePassed,
	instance.ErrUnknownSuspendID, instance.ErrAlreadyResolved, instance.ErrNotSuspended,
	instance.ErrPayloadDecode, instance.ErrInvalidEvent, instance.ErrInvalidInput,
	command.ErrUnknownCommand, command.ErrNoTarget, command.ErrFailed,
}

// fuzzModel answers a tool result with text, and anything else with two
// calls: "ask" (typed, waiting for the event ci.passed for an hour) and
// "free". It never fails, so a Run's error is its input's.
func fuzzModel() *scripted.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		for _, p := range req.Messages[len(req.Messages)-1].Parts {
			if p.Kind == message.KindToolResult {
				return scripted.Text("ok"), nil
			}
		}
		return scripted.Tools(scripted.Call{Name: "ask", Input: askIn{"a"}}, scripted.Call{Name: "free", Input: askIn{"b"}}), nil
	})
}

// fuzzID resolves a fuzzed suspend ID: "#0" and "#1" name the machine's
// pending calls, anything else is itself.
func fuzzID(id string, pending []string) string {
	if i, err := strconv.Atoi(strings.TrimPrefix(id, "#")); err == nil && strings.HasPrefix(id, "#") && i >= 0 && i < len(pending) {
		return pending[i]
	}
	return id
}

// FuzzRunInputs parks a machine on two calls, a typed one waiting for an
// event with a deadline and a free-form one, then runs it, its clock
// advanced by advance minutes, on a batch of fuzzed inputs: which of a
// resume, a cancel, a command, a user message, a signal and a good resume
// of the other call sel picks, with fuzzed suspend IDs, payload bytes,
// names and text. A Run that fails must fail before any step with an
// error wrapping one of the input sentinels (inputErrors), and leave the
// machine byte-identical (serialize.Marshal).
func FuzzRunInputs(f *testing.F) {
	f.Add(uint8(1), "#0", []byte(`{"approved":true}`), false, "grant", "hi", uint8(0))
	f.Add(uint8(1), "#1", []byte(`"fine"`), true, "", "", uint8(0))
	f.Add(uint8(1|64), "#0", []byte(`{"approved":"yes"}`), false, "", "", uint8(0))
	f.Add(uint8(1), "#0", []byte(`{"approved":true}`), false, "", "", uint8(61))
	f.Add(uint8(2), "#1", []byte(nil), false, "", "no longer needed", uint8(0))
	f.Add(uint8(2|64), "#1", []byte(nil), false, "", "", uint8(0))
	f.Add(uint8(4), "", []byte(`{"id":"#0","payload":{"approved":false}}`), false, "grant", "", uint8(0))
	f.Add(uint8(4), "", []byte(`{"id":"nope"}`), false, "grant", "", uint8(0))
	f.Add(uint8(4), "", []byte(`{`), false, "grant", "", uint8(0))
	f.Add(uint8(4), "", []byte(`{}`), false, "no_such_command", "", uint8(0))
	f.Add(uint8(8|1), "nope", []byte(`1`), false, "", "hello", uint8(0))
	f.Add(uint8(16), "", []byte(`{"approved":true}`), false, "ci.passed", "", uint8(0))
	f.Add(uint8(16|32), "#0", []byte(`{"approved":true}`), false, "ci.passed", "", uint8(0))
	f.Add(uint8(16), "", []byte(`{}`), false, "ci\npassed", "", uint8(0))
	f.Add(uint8(128|1), "#1", []byte{0xff, 0xfe}, false, "", "", uint8(0))
	f.Add(uint8(1|2), "#0", []byte(`{"approved":true}`), false, "", "", uint8(0))
	f.Fuzz(func(t *testing.T, sel uint8, id string, payload []byte, isError bool, name, text string, advance uint8) {
		clock := newClock()
		c := charterCfg(t, machine.CharterConfig{Model: fuzzModel(), Nodes: []*node.Node{typedDesk(t, instance.WithEvent("ci.passed"), instance.WithTimeout(time.Hour))}, Clock: clock.Now})
		m := newMachine(t, c, "desk")
		pending := pendingIDs(run(t, m, machine.UserText("go")))
		require.Len(t, pending, 2)
		clock.Advance(time.Duration(advance) * time.Minute)
		before := marshal(t, m)

		var p any = payload
		if sel&128 != 0 {
			p = json.RawMessage(payload)
		}
		suspendID := fuzzID(id, pending)
		// A command's input may name a pending call as "#0" or "#1" too.
		input := bytes.ReplaceAll(bytes.ReplaceAll(payload, []byte(`"#0"`), strconv.AppendQuote(nil, pending[0])), []byte(`"#1"`), strconv.AppendQuote(nil, pending[1]))
		var inputs []machine.Input
		if sel&1 != 0 {
			inputs = append(inputs, machine.ResumeInput{SuspendID: suspendID, Payload: p, IsError: isError})
		}
		if sel&2 != 0 {
			inputs = append(inputs, machine.CancelInput{SuspendID: suspendID, Reason: text})
		}
		if sel&4 != 0 {
			inputs = append(inputs, command.Invocation{Name: name, Input: json.RawMessage(input)})
		}
		if sel&8 != 0 {
			inputs = append(inputs, machine.UserText(text))
		}
		if sel&16 != 0 {
			s := machine.SignalInput{Event: name, Payload: p}
			if sel&32 != 0 {
				s.SuspendID = suspendID
			}
			inputs = append(inputs, s)
		}
		if sel&64 != 0 {
			inputs = append(inputs, machine.ResumeInput{SuspendID: pending[1], Payload: "granted"})
		}

		steps, err := collect(m.Run(context.Background(), inputs...))
		if err == nil {
			return
		}
		require.Empty(t, steps, "a failed Run yielded steps: %v", err)
		typed := false
		for _, s := range inputErrors {
			typed = typed || errors.Is(err, s)
		}
		require.True(t, typed, "untyped error %v", err)
		require.Equal(t, string(before), string(marshal(t, m)), "a failed Run changed the machine: %v", err)
	})
}
