package bridge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/markov-agents/markov/store"
)

// MaxToken is the length, in bytes, of the longest token Open reads.
const MaxToken = 16 << 10

// tokenVersion is the format version a token carries.
const tokenVersion = 1

// Continuation is what a continuation token names: a machine, the
// suspensions it was issued for, and when it stops being good.
type Continuation struct {
	MachineID  string
	SuspendIDs []string
	Expires    time.Time
}

// wireToken is the signed body of a token.
type wireToken struct {
	V int      `json:"v"`
	M string   `json:"m"`
	S []string `json:"s"`
	E int64    `json:"e"`
}

// TokenError is a token Open refuses: Err is ErrBadToken or
// ErrTokenExpired, Detail says what is wrong.
type TokenError struct {
	Err    error
	Detail string
}

func (e *TokenError) Error() string { return e.Err.Error() + ": " + e.Detail }

// Unwrap returns ErrBadToken or ErrTokenExpired.
func (e *TokenError) Unwrap() error { return e.Err }

func bad(detail string) error { return &TokenError{Err: ErrBadToken, Detail: detail} }

var b64 = base64.RawURLEncoding

// seal encodes c and signs it: base64url(body) "." base64url(HMAC).
func seal(secret []byte, c Continuation) (string, error) {
	body, err := json.Marshal(wireToken{V: tokenVersion, M: c.MachineID, S: c.SuspendIDs, E: c.Expires.Unix()})
	if err != nil {
		return "", err
	}
	enc := b64.EncodeToString(body)
	return enc + "." + b64.EncodeToString(sign(secret, enc)), nil
}

func sign(secret []byte, enc string) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(enc))
	return mac.Sum(nil)
}

// open checks token's signature and decodes it; the expiry is the
// caller's to check.
func open(secret []byte, token string) (Continuation, error) {
	if len(token) > MaxToken {
		return Continuation{}, bad("longer than the limit")
	}
	enc, sig, ok := strings.Cut(token, ".")
	if !ok {
		return Continuation{}, bad("no signature")
	}
	mac, err := b64.DecodeString(sig)
	if err != nil || !hmac.Equal(mac, sign(secret, enc)) {
		return Continuation{}, bad("signature does not match")
	}
	body, err := b64.DecodeString(enc)
	if err != nil {
		return Continuation{}, bad("body is not base64url")
	}
	var w wireToken
	if err := json.Unmarshal(body, &w); err != nil {
		return Continuation{}, bad("body is not JSON")
	}
	if w.V != tokenVersion {
		return Continuation{}, bad("unknown version")
	}
	if !store.ValidID(w.M) {
		return Continuation{}, bad("no machine")
	}
	for _, id := range w.S {
		if !store.ValidID(id) {
			return Continuation{}, bad("a suspension ID is not valid")
		}
	}
	return Continuation{MachineID: w.M, SuspendIDs: w.S, Expires: time.Unix(w.E, 0)}, nil
}
