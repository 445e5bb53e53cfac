package console

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fuzzIDP is a provider's discovery document and a token endpoint that
// counts the exchanges asked of it, refusing each.
func fuzzIDP(tb testing.TB) (*httptest.Server, *atomic.Int64) {
	var exchanges atomic.Int64
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": srv.URL, "authorization_endpoint": srv.URL + "/auth",
			"token_endpoint": srv.URL + "/token", "jwks_uri": srv.URL + "/jwks"})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, _ *http.Request) {
		exchanges.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
	})
	return srv, &exchanges
}

// FuzzOIDCCallback: whatever the callback's query and this browser's
// sign-in cookie, the callback refuses with ErrSignIn (the fuzz
// provider exchanges no code), goes next only to a console path, and
// asks the provider to exchange a code only for the query's state
// being the one sealed in the cookie by the console.
func FuzzOIDCCallback(f *testing.F) {
	idp, exchanges := fuzzIDP(f)
	o, err := newOpenID(OIDC{IssuerURL: idp.URL, ClientID: "c", ClientSecret: "s", RedirectURL: "http://console.test/ui/oidc/callback"}, "/ui/")
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1_900_000_000, 0)
	c := &Console{prefix: "/ui/", oidc: o, log: slog.New(slog.DiscardHandler), now: func() time.Time { return now },
		auth: &auth{key: []byte("fuzz key"), signIn: true, path: "/ui/", now: func() time.Time { return now }}}
	flow, _ := json.Marshal(oidcFlow{State: "s1", Nonce: "n1", Verifier: "v1", Next: "/ui/machines"})
	good := c.auth.seal("oidc", flow, oidcFlowTTL)
	f.Add("state=s1&code=abc", good)
	f.Add("state=s2&code=abc", good)
	f.Add("state=s1&error=access_denied&error_description=no", good)
	f.Add("state=s1&code=", good)
	f.Add("state=s1&code=abc", good[:len(good)-2]+"AA")
	f.Add("code=abc&state=s1", c.auth.seal("session", flow, oidcFlowTTL))
	f.Add("%zz&state=s1;code=1", "")
	f.Add("state=&code=x", c.auth.seal("oidc", []byte(`{"s":"","x":"//evil.example"}`), oidcFlowTTL))
	f.Fuzz(func(t *testing.T, query, cookie string) {
		r := httptest.NewRequest(http.MethodGet, "/ui/oidc/callback", nil)
		r.URL.RawQuery = query
		r.Header.Set("Cookie", oidcCookie+"="+cookie)
		before := exchanges.Load()
		_, next, err := c.oidcFinish(r)
		if !errors.Is(err, ErrSignIn) {
			t.Fatalf("oidcFinish(%q, %q) = %v, want ErrSignIn", query, cookie, err)
		}
		if u, perr := url.Parse(next); perr != nil || u.Host != "" || !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") {
			t.Fatalf("next %q is not a console path", next)
		}
		q := r.URL.Query()
		sent, _ := r.Cookie(oidcCookie)
		want := sent != nil && sent.Value == good && q.Get("state") == "s1" && q.Get("error") == "" && q.Get("code") != ""
		// (oauth2 may ask twice, to learn how the client authenticates.)
		if got := exchanges.Load() - before; (got > 0) != want {
			t.Fatalf("query %q, cookie %q: %d exchanges, want some: %v", query, cookie, got, want)
		}
	})
}

// FuzzIdentityOf: an ID token's claims give an identity with a subject
// and the groups claim's strings, or an ErrSignIn.
func FuzzIdentityOf(f *testing.F) {
	for _, s := range []string{`{"sub":"ada","groups":["managers","x"]}`, `{"sub":"ada","groups":"managers"}`, `{"sub":"ada"}`,
		`{"sub":"","groups":[]}`, `{"sub":"ada","groups":[1]}`, `{"sub":7}`, `{"sub":"ada","groups":{"a":1}}`, `{"sub":"ada","groups":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var claims map[string]any
		if json.Unmarshal(data, &claims) != nil {
			return
		}
		id, err := identityOf(claims, "sub", "groups")
		if err != nil {
			if !errors.Is(err, ErrSignIn) || id.Subject != "" {
				t.Fatalf("identityOf(%s) = %+v, %v", data, id, err)
			}
			return
		}
		if id.Subject == "" || id.Subject != claims["sub"] {
			t.Fatalf("identityOf(%s): subject %q", data, id.Subject)
		}
		claim := claims["groups"]
		if g, ok := claim.(string); ok {
			claim = []string{g}
		}
		got, _ := json.Marshal(id.Groups)
		if want, _ := json.Marshal(claim); claim != nil && string(got) != string(want) {
			t.Fatalf("identityOf(%s): groups %s, claim %s", data, got, want)
		}
	})
}
