package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Cookie names.
const (
	sessionCookie = "markov_console_session"
	csrfCookie    = "markov_console_csrf"
	csrfField     = "csrf"
)

// auth signs sessions and CSRF tokens with one key.
type auth struct {
	key    []byte
	secret []byte
	header string
	ttl    time.Duration
	path   string
	now    func() time.Time
}

func (a *auth) mac(parts ...string) []byte {
	h := hmac.New(sha256.New, a.key)
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return h.Sum(nil)
}

// checkSecret compares a sign-in secret in constant time.
func (a *auth) checkSecret(given string) bool {
	if len(a.secret) == 0 {
		return false
	}
	g := sha256.Sum256([]byte(given))
	w := sha256.Sum256(a.secret)
	return hmac.Equal(g[:], w[:])
}

// identity is who sent r: the proxy's header, else a valid session
// cookie's name, else "".
func (a *auth) identity(r *http.Request) string {
	if a.header != "" {
		if v := strings.TrimSpace(r.Header.Get(a.header)); v != "" {
			return v
		}
	}
	if len(a.secret) == 0 {
		return ""
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	return a.openSession(c.Value)
}

// session is name.expiry.mac, name base64url.
func (a *auth) session(name string) string {
	exp := strconv.FormatInt(a.now().Add(a.ttl).Unix(), 10)
	n := base64.RawURLEncoding.EncodeToString([]byte(name))
	return n + "." + exp + "." + base64.RawURLEncoding.EncodeToString(a.mac("session", n, exp))
}

func (a *auth) openSession(v string) string {
	n, rest, ok := strings.Cut(v, ".")
	exp, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return ""
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, a.mac("session", n, exp)) {
		return ""
	}
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || a.now().Unix() >= e {
		return ""
	}
	name, err := base64.RawURLEncoding.DecodeString(n)
	if err != nil {
		return ""
	}
	return string(name)
}

// csrfNonce returns the request's CSRF cookie nonce, setting a new one
// on w when there is none.
func (a *auth) csrfNonce(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 16 {
		return c.Value
	}
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, a.cookie(r, csrfCookie, v, 0))
	// Later readers of this request see it too.
	r.AddCookie(&http.Cookie{Name: csrfCookie, Value: v})
	return v
}

// csrfToken is the token forms of this request carry: the nonce signed
// with the identity, so it is good for this session only.
func (a *auth) csrfToken(w http.ResponseWriter, r *http.Request, who string) string {
	return base64.RawURLEncoding.EncodeToString(a.mac("csrf", a.csrfNonce(w, r), who))
}

// checkCSRF reports whether the posted form's token matches the cookie
// nonce and the identity.
func (a *auth) checkCSRF(r *http.Request, who string) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(r.PostFormValue(csrfField))
	return err == nil && hmac.Equal(got, a.mac("csrf", c.Value, who))
}

func (a *auth) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: name, Value: value, Path: a.path, MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode,
	}
}
