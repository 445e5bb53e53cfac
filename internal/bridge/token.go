package bridge

import (
	"cmp"
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

// wireToken is the signed body of a token: a continuation token (K
// empty) or a task ID (K "task", C its creation in Unix milliseconds).
type wireToken struct {
	V int      `json:"v"`
	K string   `json:"k,omitempty"`
	M string   `json:"m"`
	S []string `json:"s,omitempty"`
	C int64    `json:"c,omitempty"`
	E int64    `json:"e"`
}

// kindTask is the kind of a task ID's body: a continuation token is
// never taken for a task ID, nor a task ID for a continuation token.
const kindTask = "task"

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

var b64 = base64.RawURLEncoding.Strict()

// seal encodes c and signs it: base64url(body) "." base64url(HMAC).
func seal(secret []byte, c Continuation) (string, error) {
	return sealWire(secret, wireToken{V: tokenVersion, M: c.MachineID, S: c.SuspendIDs, E: c.Expires.Unix()})
}

// sealWire encodes w and signs it.
func sealWire(secret []byte, w wireToken) (string, error) {
	body, err := json.Marshal(w)
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

// open checks token's signature and decodes it as a continuation token;
// the expiry is the caller's to check.
func open(secret []byte, token string) (Continuation, error) {
	w, err := openWire(secret, token, "")
	if err != nil {
		return Continuation{}, err
	}
	return Continuation{MachineID: w.M, SuspendIDs: w.S, Expires: time.Unix(w.E, 0)}, nil
}

// openWire checks token's signature and decodes its body, which must be
// of kind kind ("" for a continuation token, kindTask for a task ID).
func openWire(secret []byte, token, kind string) (wireToken, error) {
	if len(token) > MaxToken {
		return wireToken{}, bad("longer than the limit")
	}
	enc, sig, ok := strings.Cut(token, ".")
	if !ok {
		return wireToken{}, bad("no signature")
	}
	mac, err := b64.DecodeString(sig)
	if err != nil || !hmac.Equal(mac, sign(secret, enc)) {
		return wireToken{}, bad("signature does not match")
	}
	body, err := b64.DecodeString(enc)
	if err != nil {
		return wireToken{}, bad("body is not base64url")
	}
	var w wireToken
	if err := json.Unmarshal(body, &w); err != nil {
		return wireToken{}, bad("body is not JSON")
	}
	switch {
	case w.V != tokenVersion:
		return wireToken{}, bad("unknown version")
	case w.K != kind:
		return wireToken{}, bad("not a " + cmp.Or(kind, "continuation") + " token")
	case !store.ValidID(w.M):
		return wireToken{}, bad("no machine")
	}
	for _, id := range w.S {
		if !store.ValidID(id) {
			return wireToken{}, bad("a suspension ID is not valid")
		}
	}
	return w, nil
}
