package resumehttp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"time"

	"github.com/markov-agents/markov/machine"
)

// DefaultIdempotencyWindow is how long a command's Idempotency-Key is
// remembered when Config.IdempotencyWindow is zero.
const DefaultIdempotencyWindow = 24 * time.Hour

// MaxIdempotencyKeyLen is the longest Idempotency-Key accepted, in bytes.
const MaxIdempotencyKeyLen = 255

// idempotencyKey returns the Idempotency-Key header of h ("" if absent):
// one value, quoted (a structured-field string, as the IETF draft
// writes it) or not, of 1 to MaxIdempotencyKeyLen characters among
// A–Z a–z 0–9 - _ . : ~. Anything else is an error wrapping
// ErrBadIdempotencyKey.
func idempotencyKey(h http.Header) (string, error) {
	vals := h.Values("Idempotency-Key")
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", fmt.Errorf("%w: %d Idempotency-Key headers, one allowed", ErrBadIdempotencyKey, len(vals))
	}
	k := vals[0]
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
	}
	if k == "" || len(k) > MaxIdempotencyKeyLen {
		return "", fmt.Errorf("%w: 1 to %d characters", ErrBadIdempotencyKey, MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if !keyChar(k[i]) {
			return "", fmt.Errorf("%w: only A-Z a-z 0-9 - _ . : ~ are allowed", ErrBadIdempotencyKey)
		}
	}
	return k, nil
}

func keyChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == ':' || c == '~'
}

// guardKey is the replay guard's key for the Idempotency-Key key of a
// command for machineID.
func guardKey(machineID, key string) string {
	sum := sha256.Sum256([]byte(machineID + "\x00" + key))
	return "idempotency:" + hex.EncodeToString(sum[:])
}

// firstInvocation records the Idempotency-Key key of a command for
// machineID with the replay guard and reports whether it is the first;
// otherwise it has answered 409 idempotency_key_reused (or 500 if the
// guard failed).
func (h *Handler) firstInvocation(w http.ResponseWriter, r *http.Request, machineID, key string) bool {
	fresh, err := h.replays.Remember(r.Context(), guardKey(machineID, key), h.now().Add(h.idemTTL))
	switch {
	case err != nil:
		h.fail(w, r, fmt.Errorf("idempotency key: %w", err))
	case !fresh:
		h.writeError(w, r, http.StatusConflict, "idempotency_key_reused",
			"a command with this Idempotency-Key was already received for this machine")
	}
	return err == nil && fresh
}

// giveBack returns what to call with the error of a command invoked with
// the Idempotency-Key key (maybe none) on machineID that failed before
// any step: an error answered with a 4xx is a command refused with the
// machine unchanged, so the key is forgotten and a corrected retry may
// use it. After a 5xx the key stays spent: whether the command applied
// may be unknown (a commit whose answer was lost).
func (h *Handler) giveBack(r *http.Request, machineID, key string) func(error) {
	return func(err error) {
		if key == "" {
			return
		}
		if status, _, _ := classify(err); status >= http.StatusInternalServerError {
			return
		}
		if err := h.replays.Forget(context.WithoutCancel(r.Context()), guardKey(machineID, key)); err != nil {
			h.log.LogAttrs(r.Context(), slog.LevelWarn, "resumehttp: give back an Idempotency-Key",
				slog.String("machine", machineID), slog.String("error", err.Error()))
		}
	}
}

// beforeAnyStep returns run, calling failed with an error it yields
// before any step first.
func beforeAnyStep(run iter.Seq2[machine.Step, error], failed func(error)) iter.Seq2[machine.Step, error] {
	return func(yield func(machine.Step, error) bool) {
		stepped := false
		for st, err := range run {
			if err != nil && !stepped {
				failed(err)
			}
			stepped = stepped || err == nil
			if !yield(st, err) {
				return
			}
		}
	}
}
