package machine

// This file is the resume conditions of the machine: signals (a named
// event resumes the calls waiting for it) and fresh-turn resumes (the
// resumed instance goes on with a digest of its earlier transcript).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/message"
)

// FreshTurnRecord is the name of the history record a fresh-turn resume
// leaves (ResumeInput.FreshTurn): its data is {"digest": "..."}, and the
// resumed instance's transcript restarts there.
const FreshTurnRecord = "fresh_turn"

// DigestInput is what a DigestFunc digests: the transcript an instance
// saw before a fresh-turn resume, and the call being resumed.
type DigestInput struct {
	// InstanceID and Node name the resumed instance.
	InstanceID, Node string
	// Transcript is everything the instance's model calls saw so far
	// (since its last fresh turn, whose digest opens it), oldest first.
	Transcript []message.Message
	// Call is the suspension being resumed.
	Call instance.SuspendedCall
}

// DigestFunc builds the digest of a fresh-turn resume: plain text that
// replaces the transcript in the instance's next model calls. It may call
// a model (for a summary); ctx is the run's.
type DigestFunc func(ctx context.Context, in DigestInput) (string, error)

// Digest limits of DefaultDigest, in bytes of text.
const (
	digestAsk   = 400 // the first user message
	digestLater = 200 // each later user message
	digestLast  = 600 // the last assistant text
	digestUsers = 3   // later user messages kept, the most recent
)

// DefaultDigest is the digest a fresh-turn resume uses unless the charter
// sets CharterConfig.Digest. It is deterministic and needs no model: a
// line saying how many messages it replaces; the first user request; the
// most recent later user messages (up to three); the tools called, with
// how many times each; the last assistant text; and what the resumed
// suspension waited for. Long texts are cut, with "…".
func DefaultDigest(in DigestInput) string {
	f := digestFactsOf(in.Transcript)
	var b strings.Builder
	fmt.Fprintf(&b, "Digest of the conversation so far (%d earlier messages are not shown):", len(in.Transcript))
	if len(f.users) > 0 {
		fmt.Fprintf(&b, "\n- The request: %s", cut(f.users[0], digestAsk))
		later := f.users[1:]
		if len(later) > digestUsers {
			later = later[len(later)-digestUsers:]
		}
		for _, u := range later {
			fmt.Fprintf(&b, "\n- Later the user said: %s", cut(u, digestLater))
		}
	}
	if len(f.toolOrder) > 0 {
		b.WriteString("\n- Tools called:")
		for i, name := range f.toolOrder {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, " %s ×%d", name, f.tools[name])
		}
	}
	if f.lastAssistant != "" {
		fmt.Fprintf(&b, "\n- Your last reply: %s", cut(f.lastAssistant, digestLast))
	}
	if in.Call.Reason != "" {
		fmt.Fprintf(&b, "\n- Then the work paused, waiting for: %s", cut(in.Call.Reason, digestLater))
	}
	b.WriteString("\nIt resumes now in a fresh turn.")
	return b.String()
}

// digestFacts is what DefaultDigest keeps of a transcript.
type digestFacts struct {
	users         []string
	lastAssistant string
	tools         map[string]int
	toolOrder     []string
}

func digestFactsOf(transcript []message.Message) digestFacts {
	f := digestFacts{tools: map[string]int{}}
	for _, m := range transcript {
		switch m.Role {
		case message.User:
			if t := m.Text(); t != "" {
				f.users = append(f.users, t)
			}
		case message.Assistant:
			if t := m.Text(); t != "" {
				f.lastAssistant = t
			}
			for _, u := range m.ToolUses() {
				if f.tools[u.Name] == 0 {
					f.toolOrder = append(f.toolOrder, u.Name)
				}
				f.tools[u.Name]++
			}
		}
	}
	return f
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// freshTurn leaves the record that restarts in's transcript with a digest
// of what it saw so far, before call's result enters history.
func (t *tx) freshTurn(in *instance.Instance, call *instance.SuspendedCall) error {
	digest, err := t.digest(in, call)
	if err != nil {
		return err
	}
	t.record(in, FreshTurnRecord, map[string]string{"digest": digest}, call.SuspendID)
	return nil
}

// digest builds the digest of in's transcript so far: the committed
// history and what this transaction added, as in's model calls see them.
func (t *tx) digest(in *instance.Instance, call *instance.SuspendedCall) (string, error) {
	var seen []message.Message
	add := func(msgs []message.Message) {
		for i := range msgs {
			seen = extendTranscript(seen, &msgs[i], in.ID)
		}
	}
	add(t.m.history.Messages())
	add(t.added[t.committed:])
	d := DigestInput{InstanceID: in.ID, Node: in.Node, Transcript: message.CloneAll(seen), Call: call.Clone()}
	if t.m.charter.digest == nil {
		return DefaultDigest(d), nil
	}
	s, err := t.m.charter.digest(t.ctx, d)
	if err != nil {
		return "", fmt.Errorf("digest: %w", err)
	}
	return s, nil
}

// extendTranscript appends h to transcript, the transcript of instance
// id, if id sees it; a fresh-turn record for id restarts the transcript
// with its digest as a user message. A full transcript grows as
// ownTranscript gives it room.
func extendTranscript(transcript []message.Message, h *message.Message, id string) []message.Message {
	if h.VisibleTo(id) {
		if len(transcript) == cap(transcript) {
			transcript = ownTranscript(transcript)
		}
		return append(transcript, *h)
	}
	if digest, ok := freshTurnDigest(h, id); ok {
		return []message.Message{{Role: message.User, Parts: []message.Part{message.Text(digest)}, Source: message.Source{To: id}}}
	}
	return transcript
}

// freshTurnDigest returns the digest of h when h is a fresh-turn record
// for instance id.
func freshTurnDigest(h *message.Message, id string) (string, bool) {
	if h.Role != message.Record || h.Source.To != id || len(h.Parts) != 1 || h.Parts[0].Name != FreshTurnRecord {
		return "", false
	}
	var d struct {
		Digest string `json:"digest"`
	}
	if json.Unmarshal(h.Parts[0].Data, &d) != nil {
		return "", false
	}
	return d.Digest, true
}

// checkSignal checks a signal before anything is applied.
func checkSignal(s SignalInput) error {
	if err := instance.CheckEvent(s.Event); err != nil {
		return fmt.Errorf("signal: %w", err)
	}
	if _, err := instance.EncodePayload(s.Payload); err != nil {
		return fmt.Errorf("signal %s: %w", s.Event, err)
	}
	return nil
}

// signal resumes the pending calls waiting for s.Event (only s.SuspendID,
// when set) that have not expired at now and whose payload schema takes
// s.Payload.
func (t *tx) signal(s SignalInput, now time.Time) ([]Step, error) {
	payload, err := instance.EncodePayload(s.Payload)
	if err != nil {
		return nil, err
	}
	var ids []string
	for c := range t.root.Pending() {
		if c.Event != s.Event || (s.SuspendID != "" && c.SuspendID != s.SuspendID) || c.Expired(now) {
			continue
		}
		if frame.CheckPayload(c, payload, false) != nil {
			continue
		}
		ids = append(ids, c.SuspendID)
	}
	var steps []Step
	for _, id := range ids {
		if _, c := t.root.FindCall(id); c == nil || c.Status != instance.StatusPending {
			continue // a resume handler of an earlier one resolved it
		}
		ri := ResumeInput{SuspendID: id, Payload: s.Payload, By: s.By, FreshTurn: s.FreshTurn}
		st, err := t.resumeWith(ri, resolution{cause: instance.CauseEvent, signal: s.Event})
		if err != nil {
			return nil, fmt.Errorf("signal %s: %w", s.Event, err)
		}
		steps = append(steps, st...)
	}
	return steps, nil
}
