package command_test

import (
	"errors"
	"testing"

	"github.com/markov-agents/markov/command"
)

func TestFailed(t *testing.T) {
	inner := errors.New("out of stock")
	err := command.Failed("order", inner)
	if !errors.Is(err, command.ErrFailed) || !errors.Is(err, inner) {
		t.Fatalf("Failed = %v: does not match ErrFailed and the handler's error", err)
	}
	if got, want := err.Error(), "command order: out of stock"; got != want {
		t.Fatalf("Failed reads %q, want %q", got, want)
	}
}
