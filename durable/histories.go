package durable

import (
	"container/list"
	"sync"

	"github.com/markov-agents/markov/message"
)

// DefaultHistoryCache is the byte budget of a Runner's history cache when
// Config.HistoryCache is zero.
const DefaultHistoryCache = 64 << 20

// histories is a Runner's cache of decoded machine histories (see
// Config.HistoryCache): for each machine it ran lately, the history it
// saved last, decoded, with the machine's incarnation. Within an
// incarnation a stored history only grows, so the next load of the
// machine reads the entries from the cached length on (store.TailLoader)
// and decodes those alone. Least recently used entries go first when the
// memory all of them take (heldSize) exceeds the budget.
type histories struct {
	mu     sync.Mutex
	budget int64
	used   int64
	order  list.List // of *cachedHistory, most recently used first
	byID   map[string]*list.Element
}

// cachedHistory is one machine's cached history.
type cachedHistory struct {
	id          string
	incarnation int64
	// from is the position in the stored history of history's first
	// message: 0, unless a run loaded the end of a long history only
	// (Runner.loadEnd), which serves runs alone.
	from    int
	history message.History
	// size is the memory history takes (heldSize).
	size int64
}

// newHistories returns a cache of budget bytes, or nil if budget is
// negative (no cache).
func newHistories(budget int64) *histories {
	switch {
	case budget < 0:
		return nil
	case budget == 0:
		budget = DefaultHistoryCache
	}
	return &histories{budget: budget, byID: map[string]*list.Element{}}
}

// get returns the cached history of machine id, the zero history if
// there is none. A held session takes it, with the array's spare
// capacity to decode the new entries into and run on in place, and puts
// it back when it saves; until then other sessions find none. Others get
// the history clipped, so that their appends copy it.
func (c *histories) get(id string, held bool) cachedHistory {
	if c == nil {
		return cachedHistory{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byID[id]
	if el == nil {
		return cachedHistory{}
	}
	h := *el.Value.(*cachedHistory)
	if !held {
		if h.from > 0 {
			return cachedHistory{} // not the whole history
		}
		h.history = h.history.Clip()
		return h
	}
	c.removeLocked(el)
	return h
}

// whole reports whether the cache holds machine id's history from its
// start (which a load outside a run can take).
func (c *histories) whole(id string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byID[id]
	return el != nil && el.Value.(*cachedHistory).from == 0
}

// end is the position in the stored history after h's last message.
func (h *cachedHistory) end() int { return h.from + h.history.Len() }

// put caches h as its machine's history, unless it exceeds the budget
// alone (the machine's entry is then dropped).
func (c *histories) put(h cachedHistory) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byID[h.id]; el != nil {
		c.removeLocked(el)
	}
	if h.size > c.budget {
		return
	}
	c.byID[h.id] = c.order.PushFront(&h)
	c.used += h.size
	for c.used > c.budget {
		c.removeLocked(c.order.Back())
	}
}

// drop forgets machine id's history.
func (c *histories) drop(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byID[id]; el != nil {
		c.removeLocked(el)
	}
}

func (c *histories) removeLocked(el *list.Element) {
	h := c.order.Remove(el).(*cachedHistory)
	delete(c.byID, h.id)
	c.used -= h.size
}
