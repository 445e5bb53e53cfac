package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var suspendIDLine = regexp.MustCompile(`(?m)^suspend ID: (\S+)$`)

func suspendID(t *testing.T, out string) string {
	t.Helper()
	m := suspendIDLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no suspend ID in output:\n%s", out)
	}
	return m[1]
}

func TestStartThenResume(t *testing.T) {
	tests := []struct {
		payload, answer, refunded string
	}{
		{`{"approved":true,"manager":"dana"}`, "Update on your refund: refund of $89.90 for order A-1042 issued, approved by dana.", "refunded: A-1042"},
		{`{"approved":false,"manager":"lee"}`, "Update on your refund: lee declined the refund for order A-1042.", "refunded: nothing"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "state.bin")
		var out bytes.Buffer
		if err := run(context.Background(), []string{"start", path}, &out); err != nil {
			t.Fatal(err)
		}
		id := suspendID(t, out.String())
		out.Reset()
		if err := run(context.Background(), []string{"resume", path, id, tt.payload}, &out); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"1 pending call", "assistant: " + tt.answer, tt.refunded} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("resume output lacks %q:\n%s", want, out.String())
			}
		}
		// The suspension is resolved for good.
		if err := run(context.Background(), []string{"resume", path, id, tt.payload}, &out); err == nil {
			t.Error("resuming twice: no error")
		}
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		nil,
		{"start"},
		{"resume", filepath.Join(dir, "missing.bin"), "id", "{}"},
		{"resume", filepath.Join(dir, "x.bin"), "id", "not json"},
	} {
		if err := run(context.Background(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	garbage := filepath.Join(dir, "garbage.bin")
	if err := os.WriteFile(garbage, []byte("MRKV\x01mxxxxgarbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"resume", garbage, "id", "{}"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("corrupt file: %v", err)
	}
}

// TestTwoProcesses builds the command and runs each phase in its own
// process.
func TestTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "restart")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	state := filepath.Join(dir, "state.bin")
	out, err := exec.Command(bin, "start", state).CombinedOutput()
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	id := suspendID(t, string(out))
	out, err = exec.Command(bin, "resume", state, id, `{"approved":true,"manager":"dana"}`).CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if want := "assistant: Update on your refund: refund of $89.90 for order A-1042 issued, approved by dana."; !strings.Contains(string(out), want) {
		t.Errorf("resume output lacks %q:\n%s", want, out)
	}
}
