// Package errtext words the error messages of bad input the same way
// everywhere: a caller's value quoted in a message is clipped, a value
// that must be one of a few names is refused with the names it may take,
// and an error shown to a person is its short message.
package errtext

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Clip shortens s to at most n bytes, marking the cut with "…", for
// quoting a caller's value in an error message.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// OneOf returns s as a T when it is one of known, and def when s is
// empty. Any other s is an error wrapping sentinel that names what the
// value is, quotes it (clipped to 64 bytes) and lists known, as in
// `<sentinel>: mode "x" (want a, b or c)`.
func OneOf[T ~string](sentinel error, what, s string, def T, known ...T) (T, error) {
	if s == "" {
		return def, nil
	}
	if v := T(s); slices.Contains(known, v) {
		return v, nil
	}
	return "", fmt.Errorf("%w: %s %q (want %s)", sentinel, what, Clip(s, 64), Alternatives(known))
}

// Alternatives lists names as "a, b or c".
func Alternatives[T ~string](names []T) string {
	var b strings.Builder
	for i, n := range names {
		switch {
		case i == 0:
		case i == len(names)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(string(n))
	}
	return b.String()
}

// ForPerson is the text of err for a person (an approver, an API client):
// the Message of the first error of its chain that has a Message() string
// method (an *instance.PayloadError: "payload: approved: expected
// boolean, got string"), short and naming the field, without the
// wrapping context a log wants; err's own text otherwise.
func ForPerson(err error) string {
	var m interface{ Message() string }
	if errors.As(err, &m) {
		return m.Message()
	}
	return err.Error()
}
