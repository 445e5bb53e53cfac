package message

// Window returns the end of transcript that a window of n messages keeps:
// its last n messages, or the whole transcript when n is zero or negative
// or the transcript is no longer. The window starts at a user message
// where it can: at the first one after the cut, so that the model sees
// whole exchanges (some providers want a conversation to open with the
// user). With none after the cut (one exchange longer than the window),
// it starts at the first message after the cut that is not a tool
// result, whose tool use it would cut off; when every message after the
// cut is one, at the assistant message before them that made the calls.
// The result shares transcript's array.
//
// Window depends only on the messages from its start on: a transcript
// that ends with the same messages as another, and holds at least one of
// them before the window's start, is windowed alike ([History.WindowFits]).
func Window(transcript []Message, n int) []Message {
	return transcript[windowStart(len(transcript), n, func(i int) Role { return transcript[i].Role }):]
}

// windowStart is where Window cuts a transcript of l messages, the i-th
// of Role role(i). Only its last step, back to the call of the results
// that follow the cut, reads messages before the cut.
func windowStart(l, n int, role func(i int) Role) int {
	if n <= 0 || l <= n {
		return 0
	}
	start := l - n
	for i := start; i < l; i++ {
		if role(i) == User {
			return i
		}
	}
	for i := start; i < l; i++ {
		if role(i) != Tool {
			return i
		}
	}
	for start > 0 && role(start) == Tool {
		start--
	}
	return start
}

// WindowFits reports whether a window of n messages ([Window]) over the
// transcript of each instance of ids — the messages of h it sees
// (VisibleTo) — starts after that transcript's first message. Then h
// holds the window and a message before it, and any longer history that
// ends with h's messages gives those instances the same windows: a
// history whose beginning was not loaded serves them as the whole one
// would (package durable loads only the end of a long history this way).
// With n zero or negative no window fits: the transcripts are whole.
func (h History) WindowFits(n int, ids ...string) bool {
	if n <= 0 {
		return false
	}
	var seen []int // positions in h of the messages an instance sees
	for _, id := range ids {
		seen = seen[:0]
		for i := range h.Len() {
			if h.at(i).VisibleTo(id) {
				seen = append(seen, i)
			}
		}
		if windowStart(len(seen), n, func(i int) Role { return h.at(seen[i]).Role }) == 0 {
			return false
		}
	}
	return true
}
