package durable

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// fuzzLog is an event log that only reads: entries, in order.
type fuzzLog struct {
	store.EventLog
	entries []store.LogEvent
}

func (l *fuzzLog) ReadEvents(_ context.Context, _ string, afterSeq int64, limit int) ([]store.LogEvent, error) {
	var out []store.LogEvent
	for _, e := range l.entries {
		if e.Seq > afterSeq && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

// FuzzWatch feeds a watcher fuzzed live payloads, then fuzzed log
// entries (each a newline-separated list of byte strings), as the store
// and the live channel could deliver them from another process. Live
// payloads that do not decode are skipped; a log entry that does not
// decode ends the watch with an error wrapping ErrEventFormat, and is the
// last thing yielded; a logged delta is trimmed to a suffix of its text;
// nothing panics.
func FuzzWatch(f *testing.F) {
	delta := func(rev int64, offset int, text string) []byte {
		b, err := encodeEvent(machine.Event{Kind: machine.EventTextDelta, InstanceID: "i", Block: 0, Text: text}, rev, offset, time.Time{})
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	lines := func(b ...[]byte) []byte { return bytes.Join(b, []byte("\n")) }
	f.Add(lines(delta(1, 0, "hel"), delta(1, 3, "lo")), lines(delta(2, 0, "hello")))
	f.Add(lines(delta(1, 0, "hel"), delta(1, 7, "lo")), lines(delta(2, 0, "hello")))
	f.Add(lines(delta(1, 0, "hello, world")), lines(delta(2, 0, "hi")))
	f.Add(lines(delta(1, 0, "x"), []byte(`{"v":1,"kind":"tool_started","rev":1,"tool":{"tool_use_id":"t"}}`)),
		lines([]byte(`{"v":1,"kind":"tool_started","rev":2,"tool":{"tool_use_id":"t"}}`)))
	f.Add([]byte(`{"v":2,"kind":"text_delta"}`), []byte(`{"v":1,"kind":"text_delta","rev":1,"offset":-5,"text":"abc"}`))
	f.Add([]byte(`{"v":1,"kind":"text_delta","rev":-1,"offset":99999999999}`), []byte(`{"v":1,"kind":"step","step":{"reason":"end_turn"}}`))
	f.Add([]byte(`not json`), []byte(`{"v":1`))
	f.Add([]byte(nil), lines(delta(1, 0, "a"), []byte(`{"v":0}`), delta(1, 0, "b")))
	f.Fuzz(func(t *testing.T, live, logged []byte) {
		var payloads [][]byte
		if len(live) > 0 {
			payloads = bytes.Split(live, []byte("\n"))
		}
		l := &fuzzLog{}
		if len(logged) > 0 {
			for i, data := range bytes.Split(logged, []byte("\n")) {
				l.entries = append(l.entries, store.LogEvent{Seq: int64(i + 1), Data: data})
			}
		}
		var got []Event
		var failed error
		w := &watcher{log: l, id: "m", yield: func(e Event, err error) bool {
			if failed != nil {
				t.Fatalf("yielded %+v, %v after the error %v", e, err, failed)
			}
			if err != nil {
				failed = err
				return false
			}
			got = append(got, e)
			return true
		}}
		w.live(payloads)
		for _, e := range got {
			if !e.Live || e.Seq != 0 {
				t.Fatalf("live event %+v not marked live", e)
			}
		}
		nLive := len(got)
		ok := w.readLog(context.Background())
		if ok != (failed == nil) {
			t.Fatalf("readLog reported %v with error %v", ok, failed)
		}
		if failed != nil && !errors.Is(failed, ErrEventFormat) {
			t.Fatalf("watch error %v does not wrap ErrEventFormat", failed)
		}
		for _, e := range got[nLive:] {
			rc, err := decodeEvent(l.entries[e.Seq-1].Data)
			if err != nil {
				t.Fatalf("event %d yielded though it does not decode: %v", e.Seq, err)
			}
			if e.Live || !strings.HasSuffix(rc.Text, e.Text) {
				t.Fatalf("logged event %d: %+v, from text %q", e.Seq, e, rc.Text)
			}
		}
	})
}
