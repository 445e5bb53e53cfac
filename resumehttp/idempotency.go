package resumehttp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"
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

// firstInvocation records the Idempotency-Key key of a command for
// machineID with the replay guard and reports whether it is the first;
// otherwise it has answered 409 idempotency_key_reused (or 500 if the
// guard failed).
func (h *Handler) firstInvocation(w http.ResponseWriter, r *http.Request, machineID, key string) bool {
	sum := sha256.Sum256([]byte(machineID + "\x00" + key))
	fresh, err := h.replays.Remember(r.Context(), "idempotency:"+hex.EncodeToString(sum[:]), h.now().Add(h.idemTTL))
	switch {
	case err != nil:
		h.fail(w, r, fmt.Errorf("idempotency key: %w", err))
	case !fresh:
		h.writeError(w, r, http.StatusConflict, "idempotency_key_reused",
			"a command with this Idempotency-Key was already received for this machine")
	}
	return err == nil && fresh
}
