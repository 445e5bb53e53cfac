package message

import "slices"

// History is a machine's history: its messages in the order they
// happened, only ever appended to. Beside the messages it keeps how many
// of the first ones every instance may see (Shared), which it learns as
// they are appended: a machine restored from a History starts its
// leaves' transcripts from that prefix without reading it again, so
// restoring a machine and running its first round cost the same at
// 10,000 messages as at 100.
//
// The zero History is empty and ready to use. A History is a small
// value, like a slice: copies share the messages' array, and appending
// to one may write into the room past the others' end. Give a History
// to one owner (machine.Restore takes it over), or Clip the copies that
// others may append to.
type History struct {
	msgs []Message
	// shared is how many of the first messages are visible to every
	// instance.
	shared int
}

// NewHistory returns the history of msgs, reading each message once to
// learn its shared prefix. The history takes msgs over, with their
// array's spare room, into which it appends.
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

// learn extends the shared prefix over the messages from from on, if it
// reaches them.
func (h *History) learn(from int) {
	if h.shared != from {
		return
	}
	for h.shared < len(h.msgs) && h.msgs[h.shared].sharedByAll() {
		h.shared++
	}
}

// sharedByAll reports whether every instance sees m: it is not a record
// and not scoped to one instance.
func (m *Message) sharedByAll() bool { return m.Role != Record && m.Source.To == "" }

// Messages returns the messages of h, capped so that appending to the
// result copies it. They are h's own: read them, do not modify them.
func (h History) Messages() []Message { return slices.Clip(h.msgs) }

// Len returns the number of messages in h.
func (h History) Len() int { return len(h.msgs) }

// Shared returns how many of the first messages of h every instance may
// see (VisibleTo any ID): the length of the prefix that holds no record
// and no message scoped to one instance.
func (h History) Shared() int { return h.shared }

// Clip returns h without the spare room past its end, so that appending
// to the result copies the messages instead of writing where h, or
// another copy, may append.
func (h History) Clip() History {
	h.msgs = slices.Clip(h.msgs)
	return h
}
