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
// suspension or a transition as before one, whether the messages' array
// has room to append into or not.
//
// What still costs in proportion to the history's length, and why:
//   - NewHistory reads every message once (a few nanoseconds each, no
//     allocation): what each instance sees is known only by looking.
//   - Messages appended past a full array (a plain slice, a clipped
//     copy) wait in an array of their own; the first read that needs all
//     the messages in one slice (Messages, or a transcript that reaches
//     past the array: a machine's second round) copies them, once, into
//     an array with as much room again. A slice has no room to write
//     into in place, and a transcript is one slice.
//   - The transcript kept past the first hidden message is shared with
//     the history while the messages the instance sees follow each other
//     (those it does not see all come before or after them); once one it
//     does not see lies between two it does, the first Transcript call
//     copies the messages it sees, once, and from then on keeps them as
//     messages are appended. (The machine keeps the transcript of any
//     other instance itself: the history's messages up to the first the
//     instance does not see, then a copy; the workers of a machine each
//     have one.)
//
// The zero History is empty and ready to use. A History is a small
// value, like a slice: copies share the messages' array (and the
// transcript's), and appending to one may write into the room past the
// others' end. Give a History to one owner (machine.Restore takes it
// over), or Clip the copies that others may append to.
type History struct {
	msgs []Message
	// more are the messages appended while msgs had no room for them, in
	// order after msgs, until join moves them to an array with msgs.
	more []Message
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
	// a history that is only read, never run, does not build it. While
	// span is set, the view is not a copy but the messages lo to hi,
	// every message the viewer sees.
	viewer   string
	viewFrom int
	view     []Message
	lo, hi   int
	// pin is the instance Follow asked for: the view, when it starts,
	// is its transcript.
	pin string
	// records are the positions of the records in msgs, in order.
	records []int
	viewing bool
	built   bool
	span    bool
	// grown is set while msgs is an array the history made (Append,
	// join): past its end it grows at once, as a machine that ran a
	// round reads it whole again the next.
	grown bool
}

// NewHistory returns the history of msgs, reading each message once to
// learn what prefix each instance sees. The history takes msgs over,
// with their array's spare room, into which it appends; with no room
// left, it appends into an array of its own and leaves msgs' as it is
// until a read needs every message in one slice (see History). A slice
// read into an array made with room past its messages (make(…, 0,
// n+n/4)) is never copied.
func NewHistory(msgs []Message) History {
	h := History{msgs: msgs}
	h.learn(0)
	return h
}

// Append adds msgs to the end of h: into the room of h's array, or, when
// it has none left, into an array of the messages past it, which a read
// that needs them all in one slice joins to the others; past the end of
// an array the history made itself (Append, join), it grows that one
// instead. Arrays double when full (a long history is copied about once
// per message it holds, where append's growth by a quarter past 256
// messages copies it four times, and leaves fewer and smaller arrays
// behind).
func (h *History) Append(msgs ...Message) {
	n := h.Len()
	switch {
	case len(h.more) == 0 && n+len(msgs) <= cap(h.msgs):
		h.msgs = append(h.msgs, msgs...)
	case len(h.more) == 0 && (n == 0 || h.grown):
		h.msgs, h.grown = grow(h.msgs, msgs), true
	default:
		h.more = grow(h.more, msgs)
	}
	h.learn(n)
}

// grow appends msgs to s, doubling its array when full.
func grow(s, msgs []Message) []Message {
	if len(s)+len(msgs) > cap(s) {
		s = slices.Grow(s, max(len(msgs), len(s)))
	}
	return append(s, msgs...)
}

// join moves the messages appended past a full array (more) into one
// array with the others, with room for as many again.
func (h *History) join() {
	if len(h.more) == 0 {
		return
	}
	h.msgs = append(slices.Grow(h.msgs, max(len(h.more), len(h.msgs))), h.more...)
	h.more, h.grown = nil, true // copies of h may hold more: it is never written again
}

// at returns the i-th message of h.
func (h *History) at(i int) *Message {
	if i < len(h.msgs) {
		return &h.msgs[i]
	}
	return &h.more[i-len(h.msgs)]
}

// appendRange appends the messages of h from from to to to dst.
func (h *History) appendRange(dst []Message, from, to int) []Message {
	n := len(h.msgs)
	if from < n {
		dst = append(dst, h.msgs[from:min(to, n)]...)
	}
	if to > n {
		dst = append(dst, h.more[max(from-n, 0):to-n]...)
	}
	return dst
}

// learn extends the prefixes over the messages from from on, and where
// they stop, the transcript view.
func (h *History) learn(from int) {
	if h.viewing {
		h.follow(from)
		return
	}
	for n := h.Len(); h.seen < n; h.seen++ {
		m := h.at(h.seen)
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
// yet, and adds to a built view what its viewer sees: a span grows by a
// message right after it, and is given up when one the viewer does not
// see lies between (the next Transcript call then copies the view).
func (h *History) follow(from int) {
	for i, n := from, h.Len(); i < n; i++ {
		m := h.at(i)
		switch {
		case m.Role == Record:
			h.records = append(h.records, i)
			continue
		case h.viewer == "":
			h.viewer = m.Source.To // "" while no message is scoped
		}
		if !h.built || !m.VisibleTo(h.viewer) {
			continue
		}
		switch {
		case !h.span:
			h.view = grow(h.view, []Message{*m})
		case h.lo == h.hi:
			h.lo, h.hi = i, i+1
		case h.hi == i:
			h.hi++
		default:
			h.built, h.span = false, false
		}
	}
}

// build builds the view: the first viewFrom messages, then the messages
// after them that the viewer sees. While they follow each other, the
// view is their span; past the first gap, a copy with room for the rest
// of the history and half as much again.
func (h *History) build() {
	n := h.Len()
	lo, hi, i := 0, h.viewFrom, h.viewFrom
	for ; i < n; i++ {
		if !h.at(i).VisibleTo(h.viewer) {
			continue
		}
		if lo == hi {
			lo = i
		} else if i != hi {
			break
		}
		hi = i + 1
	}
	h.built = true
	if i == n {
		h.span, h.lo, h.hi, h.view = true, lo, hi, nil
		return
	}
	h.view = h.appendRange(make([]Message, 0, n+n/2+8), lo, hi)
	for ; i < n; i++ {
		if m := h.at(i); m.VisibleTo(h.viewer) {
			h.view = append(h.view, *m)
		}
	}
}

// Messages returns the messages of h, capped so that appending to the
// result copies it. They are h's own: read them, do not modify them. The
// first call after messages were appended past a full array copies them
// all into one array (see History).
func (h *History) Messages() []Message {
	h.join()
	return slices.Clip(h.msgs)
}

// Len returns the number of messages in h.
func (h History) Len() int { return len(h.msgs) + len(h.more) }

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
// from another. Past that point they are shared with h while they
// follow each other, and copied (once) by the first call after one that
// id does not see came between two it does: a history that is only read
// pays nothing for it. A transcript that reaches past messages appended
// beyond a full array joins them first (see History). The result is h's
// own, capped so that appending to it copies it: read it, do not modify
// it.
func (h *History) Transcript(id string) (msgs []Message, ok bool) {
	switch {
	case !h.viewing && (h.owner == "" || h.owner == id):
		h.join()
		return slices.Clip(h.msgs), true
	case h.viewing && (h.viewer == "" || h.viewer == id):
		if !h.built {
			h.build()
		}
		if !h.span {
			return slices.Clip(h.view), true
		}
		if h.hi > len(h.msgs) {
			h.join()
		}
		return h.msgs[h.lo:h.hi:h.hi], true
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
	h.viewing, h.viewer, h.viewFrom, h.built, h.span, h.view = true, id, h.open, false, false, nil
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
	h.msgs, h.grown = slices.Clip(h.msgs), false
	h.more = slices.Clip(h.more)
	h.view = slices.Clip(h.view)
	h.records = slices.Clip(h.records)
	return h
}
