package acpdemo

import (
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
)

// waitOptions are the suspend options of a wait for event.
func waitOptions(string) []instance.SuspendOption { return nil }

// freshTurn reports whether req starts a fresh turn after a resume.
func freshTurn(*llm.Request) bool { return false }
