package message

import "slices"

// History is a machine's history: its messages in the order they
// happened, only ever appended to. Beside the messages it keeps how far
// from the start each instance sees every message (SeenBy), which it
// learns as they are appended: a machine restored from a History starts
// its leaves' transcripts past that prefix without reading it again, so
// restoring a machine and running its first round cost the same at
// 10,000 messages as at 100. (No transcript shows records: from the first
// record on, which a suspension or a transition writes, a leaf still
// reads the messages and copies those it sees.)
//
// The zero History is empty and ready to use. A History is a small
// value, like a slice: copies share the messages' array, and appending
// to one may write into the room past the others' end. Give a History
// to one owner (machine.Restore takes it over), or Clip the copies that
// others may append to.
type History struct {
	msgs []Message
	// open is how many of the first messages are visible to every
	// instance: no record, none scoped to an instance.
	open int
	// seen is how many of the first messages are visible to owner: no
	// record, none scoped to an instance but owner (an agent's own tool
	// exchanges are scoped to it). Past open when owner is set.
	seen  int
	owner string
}

// NewHistory returns the history of msgs, reading each message once to
// learn what prefix each instance sees. The history takes msgs over,
// with their array's spare room, into which it appends.
func NewHistory(msgs []Message) History {
	h := History{msgs: msgs}
	h.learn(0)
	return h
}

// Append adds msgs to the end of h. When the array is full it doubles (a
// long history is copied about once per message it holds, where append's
// growth by a quarter past 256 messages copies it four times, and leaves
// fewer and smaller arrays behind).
func (h *History) Append(msgs ...Message) {
	n := len(h.msgs)
	if n+len(msgs) > cap(h.msgs) {
		h.msgs = slices.Grow(h.msgs, max(len(msgs), n))
	}
	h.msgs = append(h.msgs, msgs...)
	h.learn(n)
}

// learn extends the prefixes over the messages from from on, if they
// reach them.
func (h *History) learn(from int) {
	if h.seen != from {
		return
	}
	for ; h.seen < len(h.msgs); h.seen++ {
		m := &h.msgs[h.seen]
		if m.Role == Record {
			return
		}
		switch to := m.Source.To; {
		case to == "":
			if h.owner == "" {
				h.open++
			}
		case h.owner == "":
			h.owner = to
		case to != h.owner:
			return
		}
	}
}

// Messages returns the messages of h, capped so that appending to the
// result copies it. They are h's own: read them, do not modify them.
func (h History) Messages() []Message { return slices.Clip(h.msgs) }

// Len returns the number of messages in h.
func (h History) Len() int { return len(h.msgs) }

// SeenBy returns how many of the first messages of h the instance id
// sees every one of (VisibleTo id), as far as h knows without reading
// them again: the prefix that holds no record and no message scoped to
// another instance, or a shorter one. An agent's history of its own tool
// exchanges (scoped to it) is seen whole by it.
func (h History) SeenBy(id string) int {
	if h.owner == "" || h.owner == id {
		return h.seen
	}
	return h.open
}

// Clip returns h without the spare room past its end, so that appending
// to the result copies the messages instead of writing where h, or
// another copy, may append.
func (h History) Clip() History {
	h.msgs = slices.Clip(h.msgs)
	return h
}
