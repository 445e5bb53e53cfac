package console

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/errtext"
)

// DefaultGroupsClaim is the ID token claim the groups are read from when
// OIDC.GroupsClaim is empty.
const DefaultGroupsClaim = "groups"

// oidcCookie holds a sign-in in progress: its state, nonce, PKCE
// verifier and where to go next, sealed, for oidcFlowTTL.
const (
	oidcCookie  = "markov_console_oidc"
	oidcFlowTTL = 10 * time.Minute
)

// maxSessionCookie is the longest session cookie value made: browsers
// keep cookies of up to 4096 bytes, name and attributes included.
const maxSessionCookie = 3800

// OIDC configures sign-in with an OpenID Connect provider (Config.OIDC):
// the authorization code flow with PKCE, state and nonce, the ID token
// verified (signature, issuer, audience, expiry). The person's identity
// is the ID token's SubjectClaim and GroupsClaim; the groups decide what
// they may approve (instance.Policy.Groups).
type OIDC struct {
	// IssuerURL is the provider's issuer; its discovery document is read
	// at New. Required.
	IssuerURL string
	// ClientID and ClientSecret are the console's client at the provider.
	// ClientID is required; ClientSecret is empty for a public client.
	// Without Config.Secret, ClientSecret keys the session cookies, so
	// sessions survive a restart.
	ClientID, ClientSecret string
	// RedirectURL is the console's callback as the provider redirects
	// browsers to it: the console's URL, its prefix, then "oidc/callback"
	// (https://console.example.com/ui/oidc/callback). Required.
	RedirectURL string
	// Scopes are asked for beyond "openid" (for example "profile",
	// "groups": whatever makes the provider put the groups in the ID
	// token).
	Scopes []string
	// SubjectClaim is the ID token claim that names the person ("sub" if
	// empty; "email" or "preferred_username" are names people read).
	SubjectClaim string
	// GroupsClaim is the ID token claim holding the person's groups, a
	// list of strings or one string (DefaultGroupsClaim if empty). A
	// token without it signs a person in with no groups.
	GroupsClaim string
	// PostLogoutRedirectURL, if set, makes signing out of the console
	// sign out of the provider too (its end_session_endpoint), which
	// then sends the browser here: a URL registered with the provider,
	// such as the console's sign-in page.
	PostLogoutRedirectURL string
	// HTTPClient calls the provider (http.DefaultClient if nil).
	HTTPClient *http.Client
}

// ErrSignIn wraps why a sign-in through the OpenID provider was refused:
// the provider's own refusal, a state that is not this browser's, a code
// the provider will not exchange, an ID token that does not verify (its
// signature, issuer, audience, expiry or nonce), a subject or groups
// claim that is missing or of the wrong type. No session is made.
var ErrSignIn = errors.New("console: sign-in refused")

// openID is a console's OpenID Connect sign-in.
type openID struct {
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	client   *http.Client
	subject  string
	groups   string
	// signOut is the provider's end_session_endpoint, with the client
	// and where to return, when a sign-out goes through it; else "".
	signOut string
}

// newOpenID reads the provider's discovery document and returns the
// sign-in cfg describes, for a console at prefix.
func newOpenID(cfg OIDC, prefix string) (*openID, error) {
	if cfg.IssuerURL == "" || cfg.ClientID == "" || cfg.RedirectURL == "" {
		return nil, fmt.Errorf("%w: OIDC: IssuerURL, ClientID and RedirectURL are required", ErrInvalidConfig)
	}
	if u, err := url.Parse(cfg.RedirectURL); err != nil || u.Path != prefix+"oidc/callback" {
		return nil, fmt.Errorf("%w: OIDC.RedirectURL %q: its path must be %soidc/callback", ErrInvalidConfig, errtext.Clip(cfg.RedirectURL, 200), prefix)
	}
	o := &openID{client: cmp.Or(cfg.HTTPClient, http.DefaultClient),
		subject: cmp.Or(cfg.SubjectClaim, "sub"), groups: cmp.Or(cfg.GroupsClaim, DefaultGroupsClaim)}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(context.Background(), o.client), time.Minute)
	defer cancel()
	p, err := oidc.NewProvider(ctx, cfg.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("%w: OIDC.IssuerURL: %w", ErrInvalidConfig, err)
	}
	scopes := []string{oidc.ScopeOpenID}
	for _, s := range cfg.Scopes {
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	o.oauth = oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL, Endpoint: p.Endpoint(), Scopes: scopes}
	o.verifier = p.Verifier(&oidc.Config{ClientID: cfg.ClientID})
	if cfg.PostLogoutRedirectURL != "" {
		var meta struct {
			EndSession string `json:"end_session_endpoint"`
		}
		_ = p.Claims(&meta)
		u, err := url.Parse(meta.EndSession)
		if err != nil || meta.EndSession == "" {
			return nil, fmt.Errorf("%w: OIDC.PostLogoutRedirectURL is set but the provider has no end_session_endpoint", ErrInvalidConfig)
		}
		q := u.Query()
		q.Set("client_id", cfg.ClientID)
		q.Set("post_logout_redirect_uri", cfg.PostLogoutRedirectURL)
		u.RawQuery = q.Encode()
		o.signOut = u.String()
	}
	return o, nil
}

// oidcFlow is a sign-in in progress, sealed in this browser's cookie.
type oidcFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
}

// oidcStart sends the browser to the provider, remembering the state,
// nonce, PKCE verifier and where to go next (?next=) in its cookie.
func (c *Console) oidcStart(w http.ResponseWriter, r *http.Request) {
	f := oidcFlow{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier(), Next: c.next(r.URL.Query().Get("next"))}
	b, _ := json.Marshal(f)
	http.SetCookie(w, c.auth.cookie(r, oidcCookie, c.auth.seal("oidc", b, oidcFlowTTL), int(oidcFlowTTL/time.Second)))
	http.Redirect(w, r, c.oidc.oauth.AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)), http.StatusSeeOther)
}

// oidcCallback is where the provider sends the browser back: with a
// good state, code and ID token the person is signed in and goes where
// they were going; otherwise the sign-in page says why not, and no
// session is made. The sign-in in progress ends either way.
func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, c.auth.cookie(r, oidcCookie, "", -1))
	id, next, err := c.oidcFinish(r)
	if err != nil {
		c.log.WarnContext(r.Context(), "markov console: failed sign-in", "provider", c.oidc.oauth.Endpoint.AuthURL, "error", err, "client", c.client(r))
		c.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Error: "Sign-in refused" + strings.TrimPrefix(err.Error(), ErrSignIn.Error()) + ". Sign in again.",
			Data: c.loginData(next)}, "")
		return
	}
	c.log.InfoContext(r.Context(), "markov console: signed in", "name", id.Subject, "groups", id.Groups, "client", c.client(r))
	c.startSession(w, r, id, next)
}

// oidcFinish checks the callback r against this browser's sign-in in
// progress and returns the identity the verified ID token names, and
// where to go next. Errors wrap ErrSignIn.
func (c *Console) oidcFinish(r *http.Request) (instance.Identity, string, error) {
	var f oidcFlow
	ck, err := r.Cookie(oidcCookie)
	if err == nil {
		b, ok := c.auth.open("oidc", ck.Value)
		if !ok || json.Unmarshal(b, &f) != nil {
			f = oidcFlow{}
		}
	}
	next := c.next(f.Next)
	q := r.URL.Query()
	switch {
	case f.State == "":
		return instance.Identity{}, next, fmt.Errorf("%w: no sign-in is in progress in this browser (it expired or was used)", ErrSignIn)
	case subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1:
		return instance.Identity{}, next, fmt.Errorf("%w: state does not match this browser's sign-in", ErrSignIn)
	case q.Get("error") != "":
		return instance.Identity{}, next, fmt.Errorf("%w: the provider refused: %s", ErrSignIn, errtext.Clip(cmp.Or(q.Get("error_description"), q.Get("error")), 200))
	case q.Get("code") == "":
		return instance.Identity{}, next, fmt.Errorf("%w: code is missing", ErrSignIn)
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(r.Context(), c.oidc.client), time.Minute)
	defer cancel()
	tok, err := c.oidc.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return instance.Identity{}, next, fmt.Errorf("%w: the provider would not exchange the code: %s", ErrSignIn, errtext.Clip(cmp.Or(re.ErrorDescription, re.ErrorCode, re.Error()), 200))
		}
		return instance.Identity{}, next, fmt.Errorf("%w: the provider could not be reached: %w", ErrSignIn, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return instance.Identity{}, next, fmt.Errorf("%w: the provider sent no id_token", ErrSignIn)
	}
	idt, err := c.oidc.verifier.Verify(ctx, raw)
	if err != nil {
		return instance.Identity{}, next, fmt.Errorf("%w: id_token: %w", ErrSignIn, err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return instance.Identity{}, next, fmt.Errorf("%w: id_token: nonce does not match this browser's sign-in", ErrSignIn)
	}
	if idt.AccessTokenHash != "" {
		if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
			return instance.Identity{}, next, fmt.Errorf("%w: id_token: at_hash: %w", ErrSignIn, err)
		}
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return instance.Identity{}, next, fmt.Errorf("%w: id_token: %w", ErrSignIn, err)
	}
	id, err := identityOf(claims, c.oidc.subject, c.oidc.groups)
	if err == nil && len(c.auth.session(id)) > maxSessionCookie {
		// A browser would drop the cookie, and the person sign in forever.
		return instance.Identity{}, next, fmt.Errorf("%w: id_token: claim %q holds too many groups (%d) for a session cookie; have the provider send only those that matter here",
			ErrSignIn, errtext.Clip(c.oidc.groups, 64), len(id.Groups))
	}
	return id, next, err
}

// identityOf is the identity an ID token's claims name: the subject
// claim, a non-empty string, and the groups claim, a list of strings or
// one string (absent: no groups). Errors wrap ErrSignIn.
func identityOf(claims map[string]any, subject, groups string) (instance.Identity, error) {
	sub, _ := claims[subject].(string)
	if sub == "" {
		return instance.Identity{}, fmt.Errorf("%w: id_token: claim %q is missing or not a string", ErrSignIn, errtext.Clip(subject, 64))
	}
	id := instance.Identity{Subject: sub}
	switch g := claims[groups].(type) {
	case nil:
	case string:
		id.Groups = []string{g}
	case []any:
		for _, v := range g {
			s, ok := v.(string)
			if !ok {
				return instance.Identity{}, fmt.Errorf("%w: id_token: claim %q is not a list of strings", ErrSignIn, errtext.Clip(groups, 64))
			}
			id.Groups = append(id.Groups, s)
		}
	default:
		return instance.Identity{}, fmt.Errorf("%w: id_token: claim %q is not a list of strings", ErrSignIn, errtext.Clip(groups, 64))
	}
	return id, nil
}

// signOutURL is where a signed-out browser goes: the provider's
// end_session_endpoint when the sign-out goes through it, else the
// sign-in page.
func (c *Console) signOutURL() string {
	if c.oidc == nil || c.oidc.signOut == "" {
		return c.prefix + "login"
	}
	return c.oidc.signOut
}
