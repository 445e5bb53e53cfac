package a2a

// This file maps an A2A message on a task to the protocol-neutral
// answers of the suspension bridge.

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/markov-agents/markov/internal/bridge"
)

// The metadata keys a client sets on a part (or on the whole message) to
// steer its answer.
const (
	// SuspendIDKey names the suspension a part answers: the suspendId of
	// the input-required status's data part. It may be left out when the
	// task waits on a single suspension. Naming it makes an answer safe
	// against a concurrent one: an answer to a suspension another
	// answer resolved first is refused (ErrAlreadyAnswered) instead of
	// answering the next question.
	SuspendIDKey = "suspendId"
	// ActionKey is "accept" (the default: the part is the payload),
	// "decline" (the call fails with the part's text as its error) or
	// "cancel" (the call is cancelled, with the text as the reason).
	ActionKey = "action"
)

// DecidedElsewhere is the key of a suspension's metadata (a JSON object)
// that marks a suspension as not the A2A client's to decide: with the
// value true its task is auth-required, and the decision comes from the
// console, the HTTP API or a Go caller. A suspension waiting for an event
// (instance.WithEvent) is decided elsewhere too.
const DecidedElsewhere = "decided_elsewhere"

// elsewhere reports whether r is decided elsewhere.
func elsewhere(r bridge.Request) bool {
	if r.Event != "" {
		return true
	}
	var meta map[string]any
	_ = json.Unmarshal(r.Metadata, &meta) // not an object: an ordinary suspension
	return meta[DecidedElsewhere] == true
}

// answers maps the parts of msg to answers for the suspensions waiting,
// the task's suspensions still pending (at least one). A part names its
// suspension with SuspendIDKey in its metadata or the message's; with
// none, it answers the only one waiting. A data part is the payload as
// JSON, a text part the payload as a JSON string (or the reason of a
// decline or cancel); file parts answer nothing. A part that answers a
// suspension decided elsewhere is ErrDecidedElsewhere; a part that names
// no suspension, or one not waiting, ErrBadAnswer — the bridge then tells
// apart a suspension that was answered already from a stranger.
func answers(msg *a2a.Message, waiting []bridge.Request) ([]bridge.Answer, error) {
	if msg == nil || len(msg.Parts) == 0 {
		return nil, fmt.Errorf("%w: the message has no parts", ErrBadAnswer)
	}
	out := make([]bridge.Answer, 0, len(msg.Parts))
	for i, p := range msg.Parts {
		if p == nil {
			return nil, fmt.Errorf("%w: part %d is empty", ErrBadAnswer, i)
		}
		id, err := metaString(p.Metadata, msg.Metadata, SuspendIDKey)
		if err != nil {
			return nil, fmt.Errorf("%w: part %d: %w", ErrBadAnswer, i, err)
		}
		if id == "" {
			if len(waiting) != 1 {
				return nil, fmt.Errorf("%w: part %d: the task waits on %d suspensions: name one with metadata %q", ErrBadAnswer, i, len(waiting), SuspendIDKey)
			}
			id = waiting[0].SuspendID
		}
		if k := slices.IndexFunc(waiting, func(r bridge.Request) bool { return r.SuspendID == id }); k >= 0 && elsewhere(waiting[k]) {
			return nil, fmt.Errorf("%w: %s: it is resolved in the console or over HTTP, not by this client", ErrDecidedElsewhere, id)
		}
		action, err := metaString(p.Metadata, msg.Metadata, ActionKey)
		if err != nil {
			return nil, fmt.Errorf("%w: part %d: %w", ErrBadAnswer, i, err)
		}
		a := bridge.Answer{SuspendID: id, Action: bridge.Action(action)}
		var value any
		switch c := p.Content.(type) {
		case a2a.Text:
			value, a.Reason = string(c), string(c)
		case a2a.Data:
			value = c.Value
		default:
			return nil, fmt.Errorf("%w: part %d: a %T part answers nothing: send text or data", ErrBadAnswer, i, p.Content)
		}
		if a.Action == "" || a.Action == bridge.Accept {
			if a.Payload, err = json.Marshal(value); err != nil {
				return nil, fmt.Errorf("%w: part %d: %w", ErrBadAnswer, i, err)
			}
			a.Reason = ""
		}
		out = append(out, a)
	}
	return out, nil
}

// metaString is the string at key of the part's metadata, or of the
// message's when the part has none; "" when neither has it.
func metaString(part, msg map[string]any, key string) (string, error) {
	v, ok := part[key]
	if !ok {
		v, ok = msg[key]
	}
	if !ok {
		return "", nil
	}
	s, isString := v.(string)
	if !isString {
		return "", fmt.Errorf("metadata %s is not a string", key)
	}
	return s, nil
}
