package message

// Window returns the end of transcript that a window of n messages keeps:
// its last n messages, or the whole transcript when n is zero or negative
// or the transcript is no longer. A window never starts at a tool result,
// whose tool use it would cut off (providers refuse the request): it
// starts at the first message after the cut that is not one, or, when
// every message after the cut is one, at the assistant message before
// them that made the calls. The result shares transcript's array.
//
// Window depends only on the messages from its start on: a transcript
// that ends with the same messages as another, and holds at least one of
// them before the window's start, is windowed alike ([History.WindowFits]).
func Window(transcript []Message, n int) []Message {
	return transcript[windowStart(len(transcript), n, func(i int) bool { return transcript[i].Role == Tool }):]
}

// windowStart is where Window cuts a transcript of l messages, the i-th
// a tool result when tool(i).
func windowStart(l, n int, tool func(i int) bool) int {
	if n <= 0 || l <= n {
		return 0
	}
	start := l - n
	for i := start; i < l; i++ {
		if !tool(i) {
			return i
		}
	}
	for start > 0 && tool(start) {
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
		for i := range h.msgs {
			if h.msgs[i].VisibleTo(id) {
				seen = append(seen, i)
			}
		}
		if windowStart(len(seen), n, func(i int) bool { return h.msgs[seen[i]].Role == Tool }) == 0 {
			return false
		}
	}
	return true
}
