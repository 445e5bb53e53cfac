package message

import (
	"cmp"
	"slices"
)

// History is a machine's history: its messages in the order they
// happened, only ever appended to. Beside the messages it keeps how far
// from the start each instance sees every message (SeenBy), which it
// learns as they are appended, and, from the first message that not
// every instance sees whole (a record, which no transcript shows, or an
// exchange scoped to another instance), the transcript of one instance
// (Transcript; the first scoped message's, or the one it is told to
// Follow — a machine has it follow its primary leaf): a machine restored
// from a History starts its leaves' transcripts from what it knows
// without reading the messages again, so restoring a machine and running
// its first round cost the same at 10,000 messages as at 100, after a
// suspension or a transition as before one. (Past that point, the
// transcript of any other instance is built by reading the messages and
// copying those it sees: the workers of a machine each have one.)
//
// The zero History is empty and ready to use. A History is a small
// value, like a slice: copies share the messages' array (and the
// transcript's), and appending to one may write into the room past the
// others' end. Give a History to one owner (machine.Restore takes it
// over), or Clip the copies that others may append to.
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
	// viewing is set once seen stops short of the end. From then on the
	// history keeps the transcript of viewer, every message it sees
	// (VisibleTo) in order: viewer is the instance the first scoped
	// message was for, or, while no message is scoped, "" (every
	// instance's transcript is then the same). The first messages, up to
	// viewFrom, are all the viewer's. view is that transcript once a
	// Transcript call built it (built), kept as messages are appended:
	// a history that is only read, never run, does not build it.
	viewing  bool
	viewer   string
	viewFrom int
	built    bool
	view     []Message
	// pin is the instance Follow asked for: the view, when it starts,
	// is its transcript.
	pin string
	// records are the positions of the records in msgs, in order.
	records []int
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

// learn extends the prefixes over the messages from from on, and where
// they stop, the transcript view.
func (h *History) learn(from int) {
	if h.viewing {
		h.follow(from)
		return
	}
	for ; h.seen < len(h.msgs); h.seen++ {
		m := &h.msgs[h.seen]
		if m.Role == Record {
			h.startView()
			return
		}
		switch to := m.Source.To; {
		case to == "":
			if h.owner == "" {
				h.open++
			}
		case h.owner == "" && (h.pin == "" || h.pin == to):
			h.owner = to
		case to != h.owner:
			h.startView()
			return
		}
	}
}

// startView starts keeping a transcript where the prefix the owner sees
// whole stops: the owner's (or the instance pinned, while there is no
// owner).
func (h *History) startView() {
	h.viewing, h.viewer, h.viewFrom = true, cmp.Or(h.owner, h.pin), h.seen
	h.follow(h.seen)
}

// follow takes in the messages from from on: it notes the records, makes
// the instance of the first scoped message the viewer when there is none
// yet, and adds to a built view what its viewer sees.
func (h *History) follow(from int) {
	for i := from; i < len(h.msgs); i++ {
		m := &h.msgs[i]
		switch {
		case m.Role == Record:
			h.records = append(h.records, i)
			continue
		case h.viewer == "":
			h.viewer = m.Source.To // "" while no message is scoped
		}
		if h.built && m.VisibleTo(h.viewer) {
			if len(h.view) == cap(h.view) {
				h.view = slices.Grow(h.view, len(h.view)) // doubling, as Append
			}
			h.view = append(h.view, *m)
		}
	}
}

// build builds the view: the first viewFrom messages, copied with room
// for the rest of the history and half as much again, then the messages
// after them that the viewer sees.
func (h *History) build() {
	n := len(h.msgs)
	h.view = append(make([]Message, 0, n+n/2+8), h.msgs[:h.viewFrom]...)
	for i := h.viewFrom; i < n; i++ {
		if h.msgs[i].VisibleTo(h.viewer) {
			h.view = append(h.view, h.msgs[i])
		}
	}
	h.built = true
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

// Transcript returns the messages the instance id sees (VisibleTo), in
// order, when h keeps them: ok is false for an instance other than the
// one h follows, once some message is hidden from one instance and not
// from another. The first call past that point copies them (once): a
// history that is only read pays nothing for it. The result is h's own,
// capped so that appending to it copies it: read it, do not modify it.
func (h *History) Transcript(id string) (msgs []Message, ok bool) {
	switch {
	case !h.viewing && (h.owner == "" || h.owner == id):
		return slices.Clip(h.msgs), true
	case h.viewing && (h.viewer == "" || h.viewer == id):
		if !h.built {
			h.build()
		}
		return slices.Clip(h.view), true
	}
	return nil, false
}

// Follow makes the transcript h keeps that of the instance id, if it is
// not already (Transcript(id) ok): the next Transcript call reads the
// messages once to copy those id sees, and from then on h keeps id's
// transcript as messages are appended; the instance it kept before loses
// it. A machine has its primary leaf's transcript followed, whoever the
// first scoped message was for.
func (h *History) Follow(id string) {
	h.pin = id
	switch {
	case !h.viewing && (h.owner == "" || h.owner == id):
		return // the view, when it starts, is id's (pin)
	case h.viewing && (h.viewer == "" || h.viewer == id):
		h.viewer = id // no message is scoped yet, or id's is the view
		return
	}
	// Every instance sees the first open messages.
	h.viewing, h.viewer, h.viewFrom, h.built, h.view = true, id, h.open, false, nil
}

// Records returns the positions in h of its records (Role Record), in
// order, as h learned them: no transcript shows a record, but the layer
// that writes one may give it a meaning for the transcript of the
// instance it is for (machine: a fresh-turn record restarts it), and
// finds them here without reading the other messages. The result is h's
// own: do not modify it.
func (h History) Records() []int { return slices.Clip(h.records) }

// Clip returns h without the spare room past its end, so that appending
// to the result copies the messages instead of writing where h, or
// another copy, may append.
func (h History) Clip() History {
	h.msgs = slices.Clip(h.msgs)
	h.view = slices.Clip(h.view)
	h.records = slices.Clip(h.records)
	return h
}
