package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/markov-agents/markov/instance"
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
	// signIn: people sign in to a session (with the secret or OIDC).
	signIn bool
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

// identity is the subject of who sent r (see principal), or "".
func (a *auth) identity(r *http.Request) string { return a.principal(r).Subject }

// principal is who sent r: the proxy's header (a subject, no groups),
// else a valid session cookie's identity, else the zero Identity.
func (a *auth) principal(r *http.Request) instance.Identity {
	if a.header != "" {
		if v := strings.TrimSpace(r.Header.Get(a.header)); v != "" {
			return instance.Identity{Subject: v}
		}
	}
	if !a.signIn {
		return instance.Identity{}
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return instance.Identity{}
	}
	return a.openSession(c.Value)
}

// session is the cookie value of a sign-in as id, good for the TTL.
func (a *auth) session(id instance.Identity) string {
	b, _ := json.Marshal(id)
	return a.seal("session", b, a.ttl)
}

func (a *auth) openSession(v string) instance.Identity {
	var id instance.Identity
	if b, ok := a.open("session", v); !ok || json.Unmarshal(b, &id) != nil {
		return instance.Identity{}
	}
	return id
}

// seal signs data for use as kind until ttl from now: data.expiry.mac,
// data base64url.
func (a *auth) seal(kind string, data []byte, ttl time.Duration) string {
	exp := strconv.FormatInt(a.now().Add(ttl).Unix(), 10)
	n := base64.RawURLEncoding.EncodeToString(data)
	return n + "." + exp + "." + base64.RawURLEncoding.EncodeToString(a.mac(kind, n, exp))
}

// open returns the data of v, sealed as kind, when its mac is good and
// it has not expired.
func (a *auth) open(kind, v string) ([]byte, bool) {
	n, rest, ok := strings.Cut(v, ".")
	exp, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return nil, false
	}
	// Strict: one encoding per value, so only what seal made opens.
	b64 := base64.RawURLEncoding.Strict()
	got, err := b64.DecodeString(sig)
	if err != nil || !hmac.Equal(got, a.mac(kind, n, exp)) {
		return nil, false
	}
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || a.now().Unix() >= e {
		return nil, false
	}
	data, err := b64.DecodeString(n)
	return data, err == nil
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

// SessionOr returns an authentication for other endpoints served on the
// console's origin — an AG-UI endpoint (agui.Config.Auth), say — that
// lets people signed in to the console use them: a request from a
// signed-in person passes, its identity in [Console.Identity]; any other
// goes to other (the API's signed requests, resumehttp.Handler.Protect),
// or is refused with 401 when other is nil. A request that rests on the
// session cookie and is not a GET, HEAD or OPTIONS must come from the
// console's origin (its Origin header names the request's host), or it
// is refused with 403, so that another site's page cannot act with a
// person's cookie.
func (c *Console) SessionOr(other func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		fallback := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "console: not signed in", http.StatusUnauthorized)
		}))
		if other != nil {
			fallback = other(next)
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := c.auth.principal(r)
			if id.Subject == "" {
				fallback.ServeHTTP(w, r)
				return
			}
			byCookie := c.auth.header == "" || strings.TrimSpace(r.Header.Get(c.auth.header)) == ""
			switch r.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
			default:
				if byCookie && !sameOrigin(r) {
					http.Error(w, "console: a signed-in request from another origin", http.StatusForbidden)
					return
				}
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), whoKey{}, id)))
		})
	}
}

// Identity is the subject of the person signed in to the console who
// sent r, through [Console.SessionOr]; "" for a request that did not come
// through it with a session (agui.Config.Identity).
func (c *Console) Identity(r *http.Request) string {
	id, _ := r.Context().Value(whoKey{}).(instance.Identity)
	return id.Subject
}

// sameOrigin reports whether r's Origin header names r's own host.
func sameOrigin(r *http.Request) bool {
	u, err := url.Parse(r.Header.Get("Origin"))
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}
