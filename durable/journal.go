package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/store"
)

// journal is a store's effect journal bound to one machine, as the
// machine's effects write it. An effect's start is written at once (it
// must be durable before the effect acts); with buffer set, its outcome
// waits for the session's next save, which records it in its own
// transaction (store.Save.Effects): one durable write per effect, not
// two. Until then this process reads the outcome from the buffer. The
// price is a crash between the effect's return and that save: the
// effect is then in doubt, where a separate write would have found it
// done (the call runs again either way, its result unsaved).
type journal struct {
	j         store.EffectJournal
	machineID string
	log       *slog.Logger
	buffer    bool

	mu   sync.Mutex
	ends []store.EffectEnd // outcomes not saved yet, oldest first
}

// newJournal returns machine id's journal in the runner's store, nil if
// the store keeps none; buffer is as in journal.
func (r *Runner) newJournal(id string, buffer bool) *journal {
	j, ok := r.store.(store.EffectJournal)
	if !ok {
		return nil
	}
	return &journal{j: j, machineID: id, log: r.log, buffer: buffer}
}

// BeginEffect implements instance.EffectJournal: an outcome in the
// buffer is the entry.
func (j *journal) BeginEffect(ctx context.Context, key, name, digest string) (instance.JournalEntry, bool, error) {
	if e, ok := j.buffered(key, digest); ok {
		return e, false, nil
	}
	e, created, err := j.j.BeginEffect(ctx, store.Effect{Key: key, MachineID: j.machineID, Name: name, Digest: digest})
	return entryOf(e), created, err
}

// RunEffectTx implements instance.TxJournal with the store's
// store.TxEffectJournal: an outcome in the buffer is the entry, and a
// store without one is instance.ErrEffectTx.
func (j *journal) RunEffectTx(ctx context.Context, key, name, digest string, fn func(ctx context.Context, tx any) ([]byte, error)) (instance.JournalEntry, bool, error) {
	if e, ok := j.buffered(key, digest); ok {
		return e, false, nil
	}
	tj, ok := j.j.(store.TxEffectJournal)
	if !ok {
		return instance.JournalEntry{}, false, fmt.Errorf("%w: effect %s: the store (%T) runs no transactions", instance.ErrEffectTx, name, j.j)
	}
	e, ran, err := tj.RunEffectTx(ctx, store.Effect{Key: key, MachineID: j.machineID, Name: name, Digest: digest}, fn)
	return entryOf(e), ran, err
}

// buffered returns the outcome of effect key in the buffer, if it holds
// one, as its entry.
func (j *journal) buffered(key, digest string) (instance.JournalEntry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	i := slices.IndexFunc(j.ends, func(e store.EffectEnd) bool { return e.Key == key })
	if i < 0 {
		return instance.JournalEntry{}, false
	}
	return instance.JournalEntry{Status: string(j.ends[i].Status), Digest: digest, Result: j.ends[i].Result}, true
}

// entryOf is the store's entry e as the machine's effects read it.
func entryOf(e store.Effect) instance.JournalEntry {
	return instance.JournalEntry{Status: string(e.Status), Digest: e.Digest, Result: e.Result, StartedAt: e.StartedAt}
}

// EndEffect implements instance.EffectJournal: buffered for the next
// save, or written at once.
func (j *journal) EndEffect(ctx context.Context, key string, failed bool, result []byte) error {
	end := store.EffectEnd{Key: key, Status: store.EffectDone, Result: result}
	if failed {
		end.Status = store.EffectFailed
	}
	if err := store.CheckEffectEnd(key, end.Status); err != nil {
		return err
	}
	if !j.buffer {
		return j.j.EndEffect(ctx, key, end.Status, result)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.ends = append(j.ends, end)
	return nil
}

// ForgetEffect implements instance.EffectJournal, dropping a buffered
// outcome of key too.
func (j *journal) ForgetEffect(ctx context.Context, key string) error {
	j.mu.Lock()
	j.ends = slices.DeleteFunc(j.ends, func(e store.EffectEnd) bool { return e.Key == key })
	j.mu.Unlock()
	return j.j.ForgetEffect(ctx, key)
}

// take returns the buffered outcomes, for a save to record, and empties
// the buffer.
func (j *journal) take() []store.EffectEnd {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	ends := j.ends
	j.ends = nil
	return ends
}

// flush writes ends, outcomes no save recorded (it failed, or the run
// ended without one), one at a time: the effects happened, and a call
// that runs again must find them ended, not in doubt. An outcome the
// store refuses is logged; its effect stays started, in doubt.
func (j *journal) flush(ctx context.Context, ends []store.EffectEnd) {
	ctx = context.WithoutCancel(ctx)
	for _, e := range ends {
		if err := j.j.EndEffect(ctx, e.Key, e.Status, e.Result); err != nil && !errors.Is(err, store.ErrConflict) {
			j.log.LogAttrs(ctx, slog.LevelWarn, "effect outcome not recorded", slog.String("machine", j.machineID),
				slog.String("effect", e.Key), slog.String("error", err.Error()))
		}
	}
}

// close flushes what the buffer holds: the session saves no more.
func (j *journal) close(ctx context.Context) {
	if j != nil {
		j.flush(ctx, j.take())
	}
}
