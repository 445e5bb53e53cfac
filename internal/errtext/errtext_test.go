package errtext_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/markov-agents/markov/internal/errtext"
)

type color string

var errBad = errors.New("pkg: invalid input")

func TestOneOf(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
		known         []color
	}{
		{in: "", want: "red", known: []color{"red", "green"}},
		{in: "green", want: "green", known: []color{"red", "green"}},
		{in: "blue", err: `pkg: invalid input: color "blue" (want red or green)`, known: []color{"red", "green"}},
		{in: "x", err: `pkg: invalid input: color "x" (want red, green or blue)`, known: []color{"red", "green", "blue"}},
		{in: strings.Repeat("y", 70), err: `pkg: invalid input: color "` + strings.Repeat("y", 64) + `…" (want red)`, known: []color{"red"}},
	} {
		got, err := errtext.OneOf(errBad, "color", tc.in, "red", tc.known...)
		if tc.err != "" {
			if !errors.Is(err, errBad) || err.Error() != tc.err || got != "" {
				t.Errorf("OneOf(%q) = %q, %v; want the error %s", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("OneOf(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestClip(t *testing.T) {
	if got := errtext.Clip("abcdef", 6); got != "abcdef" {
		t.Errorf("Clip kept %q", got)
	}
	if got := errtext.Clip("abcdefg", 3); got != "abc…" {
		t.Errorf("Clip cut to %q", got)
	}
}

// shortErr has a message for a person.
type shortErr struct{}

func (shortErr) Error() string   { return "pkg: thing 42: payload: x: required" }
func (shortErr) Message() string { return "payload: x: required" }

func TestForPerson(t *testing.T) {
	wrapped := fmt.Errorf("durable: input rejected: %w", shortErr{})
	if got := errtext.ForPerson(wrapped); got != "payload: x: required" {
		t.Errorf("ForPerson = %q", got)
	}
	plain := errors.New("no such thing")
	if got := errtext.ForPerson(fmt.Errorf("wrap: %w", plain)); got != "wrap: no such thing" {
		t.Errorf("ForPerson = %q", got)
	}
}
