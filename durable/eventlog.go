package durable

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// EventFormat is the version of the encoding of logged and live events
// (the "v" field); see docs/events.md.
const EventFormat = 1

// Event is one event of a durable machine's run, as [Runner.Watch]
// yields it: a machine.Event with its place in the machine's event log.
type Event struct {
	machine.Event
	// Seq is the event's sequence number in the machine's event log
	// (1, 2, …); 0 for a live event, which is not in the log (yet).
	Seq int64 `json:"seq,omitempty"`
	// Revision is the machine revision the event belongs to: for a logged
	// event, the save that appended it; for a live one, the revision the
	// machine was at while it happened (the save recording it comes next).
	Revision int64 `json:"rev"`
	// At is when the event was logged, or published for a live one.
	At time.Time `json:"at,omitzero"`
	// Live marks an event as it happened, before the save that logs it: a
	// text or thinking delta, or a tool call starting. The log records it
	// at the next save, deltas coalesced into one per content block.
	Live bool `json:"live,omitempty"`
	// Echo marks a logged event this watcher already received, all of
	// it, live: it advances the cursor (Seq) and shows nothing new. A
	// logged text or thinking delta of which the watcher received a part
	// live carries only the rest, so the deltas a watcher receives add up
	// to each block's text once.
	Echo bool `json:"echo,omitempty"`
}

// record is an event as the log and the live channel encode it: a
// machine.Event with a format version, a revision and, for a live delta,
// the byte offset of its text in its content block.
type record struct {
	V int `json:"v"`
	machine.Event
	Rev    int64     `json:"rev"`
	Offset int       `json:"offset,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// encodeEvent encodes e, of the save making revision rev, for the log.
// A step event loses its Root (the log is not a snapshot store).
func encodeEvent(e machine.Event, rev int64, offset int, at time.Time) ([]byte, error) {
	if e.Step != nil && e.Step.Root != nil {
		st := *e.Step
		st.Root = nil
		e.Step = &st
	}
	return json.Marshal(record{V: EventFormat, Event: e, Rev: rev, Offset: offset, At: at})
}

// decodeEvent decodes a log entry or live payload.
func decodeEvent(data []byte) (record, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return record{}, fmt.Errorf("%w: %w", ErrEventFormat, err)
	}
	if r.V != EventFormat {
		return record{}, fmt.Errorf("%w: version %d, want %d", ErrEventFormat, r.V, EventFormat)
	}
	return r, nil
}

// isDelta reports whether kind is a text or thinking delta.
func isDelta(kind machine.EventKind) bool {
	return kind == machine.EventTextDelta || kind == machine.EventThinkingDelta
}

// isLive reports whether events of kind are published live: deltas, and
// the events that have a liveKey.
func isLive(e machine.Event) bool {
	return isDelta(e.Kind) || liveKey(e) != ""
}

// liveKey names a live event that is not a delta, so that a watcher
// recognises it when the log brings it again: tool calls by tool-use ID,
// suspension lifecycle events by suspend ID. "" for other events.
func liveKey(e machine.Event) string {
	switch {
	case e.Tool != nil && (e.Kind == machine.EventToolStarted || e.Kind == machine.EventToolFinished):
		return string(e.Kind) + "/" + e.Tool.ToolUseID
	case e.Lifecycle != nil:
		return string(e.Kind) + "/" + e.Lifecycle.SuspendID
	}
	return ""
}

// blockKey names one content block of one leaf's reply within a segment
// (the events between two saves).
type blockKey struct {
	rev      int64
	kind     machine.EventKind
	instance string
	block    int
}

func keyOf(e machine.Event, rev int64) blockKey {
	return blockKey{rev: rev, kind: e.Kind, instance: e.InstanceID, block: e.Block}
}

// maxLiveText is the longest delta text one live payload carries: at most
// six bytes each once JSON-escaped, well under store.MaxLivePayload.
const maxLiveText = 1024

// recorder collects a session's events for its next save, coalescing
// deltas per content block, and publishes the live ones.
type recorder struct {
	log    store.EventLog
	id     string
	logger *slog.Logger
	// pending are the events of the next save; blocks indexes its deltas.
	pending []machine.Event
	blocks  map[blockKey]int
	// offsets are the bytes of each block published live so far.
	offsets map[blockKey]int
	pub     *publisher
}

// newRecorder returns the recorder of machine id, nil when the store
// keeps no event log.
func (r *Runner) newRecorder(id string) *recorder {
	l, ok := r.store.(store.EventLog)
	if !ok {
		return nil
	}
	return &recorder{log: l, id: id, logger: r.log}
}

// add records e, which happened at revision rev.
func (rc *recorder) add(ctx context.Context, e machine.Event, rev int64) {
	if rc == nil {
		return
	}
	if e.Kind == machine.EventStep && e.Step.Reason == machine.Replied {
		return // a checkpoint: its save logs the reply's deltas, not a step
	}
	if isLive(e) {
		rc.publish(ctx, e, rev)
	}
	if !isDelta(e.Kind) {
		rc.pending = append(rc.pending, e)
		return
	}
	k := keyOf(e, 0)
	if i, ok := rc.blocks[k]; ok {
		rc.pending[i].Text += e.Text
		return
	}
	if rc.blocks == nil {
		rc.blocks = map[blockKey]int{}
	}
	rc.blocks[k] = len(rc.pending)
	rc.pending = append(rc.pending, e)
}

// publish hands e to the live channel, split to fit a payload.
func (rc *recorder) publish(ctx context.Context, e machine.Event, rev int64) {
	if rc.pub == nil {
		rc.pub = newPublisher(ctx, rc.log, rc.id, rc.logger)
	}
	if rc.offsets == nil {
		rc.offsets = map[blockKey]int{}
	}
	now := time.Now().UTC()
	if !isDelta(e.Kind) {
		if b, err := encodeEvent(e, rev, 0, now); err == nil && len(b) <= store.MaxLivePayload {
			rc.pub.send(b)
		}
		return
	}
	k := keyOf(e, rev)
	text := e.Text
	for text != "" {
		n := min(len(text), maxLiveText)
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n--
		}
		part := e
		part.Text = text[:n]
		if b, err := encodeEvent(part, rev, rc.offsets[k], now); err == nil {
			rc.pub.send(b)
		}
		rc.offsets[k] += n
		text = text[n:]
	}
}

// take returns the encoded events of the save making revision rev, and
// forgets them. It first waits for the live events to be published, so
// that watchers see them before the save that records them.
func (rc *recorder) take(rev int64) ([][]byte, error) {
	if rc == nil || len(rc.pending) == 0 {
		return nil, nil
	}
	if rc.pub != nil {
		rc.pub.flush()
	}
	at := time.Now().UTC()
	out := make([][]byte, 0, len(rc.pending))
	for _, e := range rc.pending {
		b, err := encodeEvent(e, rev, 0, at)
		if err != nil {
			return nil, fmt.Errorf("encode %s event: %w", e.Kind, err)
		}
		out = append(out, b)
	}
	rc.pending, rc.blocks, rc.offsets = rc.pending[:0], nil, nil
	return out, nil
}

// close stops the publisher after it published what it has.
func (rc *recorder) close() {
	if rc != nil && rc.pub != nil {
		rc.pub.close()
	}
}

// publisher publishes live payloads from a goroutine of its own, in
// batches, so that a slow store never holds up a model's stream. Its queue
// grows with what is queued (a run that publishes little allocates
// little).
type publisher struct {
	mu     sync.Mutex
	queue  []pubItem
	closed bool
	// wake tells the goroutine the queue changed; done that it ended.
	wake chan struct{}
	done chan struct{}
}

// pubItem is a payload, or (nil data) a flush request to acknowledge.
type pubItem struct {
	data []byte
	ack  chan struct{}
}

// maxBatch caps the payloads of one Publish call; maxQueued the payloads
// waiting to be published.
const (
	maxBatch  = 64
	maxQueued = 1024
)

func newPublisher(ctx context.Context, l store.EventLog, id string, logger *slog.Logger) *publisher {
	p := &publisher{wake: make(chan struct{}, 1), done: make(chan struct{})}
	ctx = context.WithoutCancel(ctx)
	publish := func(batch [][]byte) {
		if len(batch) == 0 {
			return
		}
		if err := l.Publish(ctx, id, batch); err != nil {
			logger.LogAttrs(ctx, slog.LevelWarn, "publish live events", slog.String("machine", id), slog.String("error", err.Error()))
		}
	}
	go func() {
		defer close(p.done)
		var batch [][]byte
		for {
			items, closed := p.take()
			for _, it := range items {
				if it.ack != nil {
					// Publish what came before a flush, then acknowledge.
					publish(batch)
					batch = nil
					close(it.ack)
					continue
				}
				if batch = append(batch, it.data); len(batch) == maxBatch {
					publish(batch)
					batch = nil
				}
			}
			publish(batch)
			batch = nil
			if closed {
				return
			}
		}
	}()
	return p
}

// take waits until something is queued or the publisher is closed, and
// returns what is queued.
func (p *publisher) take() (items []pubItem, closed bool) {
	for {
		p.mu.Lock()
		items, closed, p.queue = p.queue, p.closed, nil
		p.mu.Unlock()
		if len(items) > 0 || closed {
			return items, closed
		}
		<-p.wake
	}
}

// put queues it and wakes the goroutine; a payload is dropped when
// maxQueued wait already (live events are best effort; the log is the
// record).
func (p *publisher) put(it pubItem) {
	p.mu.Lock()
	if it.ack != nil || len(p.queue) < maxQueued {
		p.queue = append(p.queue, it)
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// send queues a payload.
func (p *publisher) send(b []byte) { p.put(pubItem{data: b}) }

// flush waits until every payload queued so far is published.
func (p *publisher) flush() {
	ack := make(chan struct{})
	p.put(pubItem{ack: ack})
	<-ack
}

// close publishes what is queued and stops the goroutine.
func (p *publisher) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	<-p.done
}
