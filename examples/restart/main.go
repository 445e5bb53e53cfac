// Command restart shows a run that suspends in one process and resumes in
// another, from the machine serialized to a file.
//
// The first process runs a support agent until its request_refund tool
// suspends for a manager's approval, writes the machine to a file with
// serialize.Marshal and exits, printing the suspend ID:
//
//	go run ./examples/restart start state.bin
//
// The second process — any time later — reads the file with
// serialize.Unmarshal, resumes the suspension with the manager's decision
// as a JSON payload, and finishes the run:
//
//	go run ./examples/restart resume state.bin <suspend-id> '{"approved":true,"manager":"dana"}'
//
// Both processes build the same charter, the refund charter of the
// approval example (nodes and tools are code; only the machine is data).
// The model is scripted, so it runs offline.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/serialize"
)

const usage = `usage:
  restart start <file>                              run until the refund waits for approval; save the machine
  restart resume <file> <suspend-id> '<json>'       load the machine, resume with the JSON decision, finish`

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "restart:", err)
		os.Exit(1)
	}
}

// run is the command: start or resume.
func run(ctx context.Context, args []string, w io.Writer) error {
	switch {
	case len(args) == 2 && args[0] == "start":
		return start(ctx, args[1], w)
	case len(args) == 4 && args[0] == "resume":
		return resume(ctx, args[1], args[2], args[3], w)
	}
	return errors.New(usage)
}

// start runs a new machine until it suspends and saves it to path.
func start(ctx context.Context, path string, w io.Writer) error {
	m, err := refund.NewMachine(refund.ScriptedModel())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "customer: %s\n", refund.CustomerRequest)
	var pending []instance.SuspendedCall
	for step, err := range m.Run(ctx, machine.UserText(refund.CustomerRequest)) {
		if err != nil {
			return err
		}
		pending = step.Suspensions
	}
	if len(pending) != 1 {
		return fmt.Errorf("want one pending call, have %d", len(pending))
	}
	call := pending[0]
	data, err := serialize.Marshal(m)
	if err != nil {
		return err
	}
	if err := writeFile(path, data); err != nil {
		return err
	}
	fmt.Fprintf(w, "suspended: %s %s (%s)\n", call.Name, call.Input, call.Reason)
	fmt.Fprintf(w, "machine saved to %s (%d bytes)\n", path, len(data))
	fmt.Fprintf(w, "suspend ID: %s\n", call.SuspendID)
	fmt.Fprintf(w, "resume with: go run ./examples/restart resume %s %s '{\"approved\":true,\"manager\":\"dana\"}'\n", path, call.SuspendID)
	return nil
}

// resume loads the machine from path, resumes suspendID with the JSON
// payload, finishes the run and saves the machine again.
func resume(ctx context.Context, path, suspendID, payload string, w io.Writer) error {
	if !json.Valid([]byte(payload)) {
		return fmt.Errorf("payload is not JSON: %s", payload)
	}
	c, err := refund.NewCharter(refund.ScriptedModel())
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	m, err := serialize.Unmarshal(c, data)
	if err != nil {
		return fmt.Errorf("load %s: %w", path, err)
	}
	fmt.Fprintf(w, "loaded %s: %d pending call(s)\n", path, len(m.Pending()))
	var answer string
	in := machine.ResumeInput{SuspendID: suspendID, Payload: json.RawMessage(payload)}
	for step, err := range m.Run(ctx, in) {
		if err != nil {
			return err
		}
		for _, msg := range step.Messages {
			if msg.Role == message.Assistant && msg.Text() != "" {
				answer = msg.Text()
			}
		}
	}
	if data, err = serialize.Marshal(m); err != nil {
		return err
	}
	if err := writeFile(path, data); err != nil {
		return err
	}
	ledger, _ := m.Root().State.(refund.Ledger)
	refunded := strings.Join(ledger.Refunded, ", ")
	if refunded == "" {
		refunded = "nothing"
	}
	fmt.Fprintf(w, "assistant: %s\n", answer)
	fmt.Fprintf(w, "refunded: %s\n", refunded)
	return nil
}

// writeFile replaces path atomically.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".restart-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
