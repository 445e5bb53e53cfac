package acpdemo

import (
	"strings"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// waitOptions are the suspend options of a wait for event.
func waitOptions(event string) []instance.SuspendOption {
	return []instance.SuspendOption{instance.WithEvent(event)}
}

// freshTurn reports whether req is a fresh turn after a resume: its
// transcript opens with the digest of what came before.
func freshTurn(req *llm.Request) bool {
	for _, m := range req.Messages {
		if m.Role == message.User {
			return strings.HasPrefix(m.Text(), "Digest of the conversation so far")
		}
	}
	return false
}
