package a2a

import (
	"errors"
	"strings"
	"testing"

	"github.com/markov-agents/markov/store"
)

// FuzzDecodeNotification feeds the push endpoint's decoder anything: it
// returns a wake naming a task, or ErrInvalidNotification; never a panic.
func FuzzDecodeNotification(f *testing.F) {
	for _, s := range []string{
		`{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}`,
		`{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_INPUT_REQUIRED","message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"?"}]}}}}`,
		`{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a","parts":[{"data":{"x":1}}]}}}`,
		`{"message":{"messageId":"m","taskId":"t1","role":"ROLE_AGENT","parts":[{"url":"https://x"}]}}`,
		`{"task":{"id":""}}`, `{"task":null}`, `{"task":{},"message":{}}`, `[]`, `null`, ``, `{"statusUpdate":{"status":{"state":7}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w, err := decodeNotification(body)
		switch {
		case err != nil && !errors.Is(err, ErrInvalidNotification):
			t.Fatalf("error %v is not ErrInvalidNotification", err)
		case err == nil && w.TaskID == "":
			t.Fatal("a wake without a task")
		}
	})
}

// FuzzTaskOf checks that a suspend ID is a valid store ID naming its task
// (unless the task is too long to fit), and that any string fed to taskOf
// is survived.
func FuzzTaskOf(f *testing.F) {
	f.Add("t1", "a2a-0123456789ABCDEF-dDE")
	f.Add("01a22469-4771-7c2d-9302-7ded1b9c051f", "a2a-")
	f.Add(strings.Repeat("long task ", 30), "a2a-0123456789ABCDEF-!!")
	f.Fuzz(func(t *testing.T, task, id string) {
		sid := suspendID(task)
		if !store.ValidID(sid) {
			t.Fatalf("suspendID(%q) = %q, not a valid ID", task, sid)
		}
		if got, ok := taskOf(sid); ok && string(got) != task {
			t.Fatalf("taskOf(suspendID(%q)) = %q", task, got)
		} else if !ok && task != "" && len(task) <= 150 {
			t.Fatalf("suspendID(%q) = %q does not name the task", task, sid)
		}
		_, _ = taskOf(id)
	})
}
