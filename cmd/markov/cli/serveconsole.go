package cli

import (
	"flag"
	"fmt"
	"net/http"
	"strings"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/webhook"
)

// consoleFlags are serve's flags for the web console.
type consoleFlags struct {
	enabled   bool
	secretEnv string
	header    string
	oidc      oidcFlags
}

// oidcFlags are the console's OpenID Connect sign-in (console.OIDC).
type oidcFlags struct {
	issuer, clientID, secretEnv, redirect, scopes, subject, groups, postLogout string
}

func (f *oidcFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.issuer, "console-oidc-issuer", "", "the OpenID provider's issuer `URL`: people sign in to the console with it (the groups in their ID token decide what they may approve)")
	fs.StringVar(&f.clientID, "console-oidc-client-id", "", "the console's client `ID` at the OpenID provider")
	fs.StringVar(&f.secretEnv, "console-oidc-client-secret-env", "MARKOV_CONSOLE_OIDC_SECRET", "the environment `variable` holding the console's client secret at the OpenID provider (unset: a public client)")
	fs.StringVar(&f.redirect, "console-oidc-redirect-url", "", "the console's sign-in callback as the provider sends browsers to it: its public `URL`, then /ui/oidc/callback")
	fs.StringVar(&f.scopes, "console-oidc-scopes", "", "comma-separated `scopes` asked for beyond openid (those that put the groups in the ID token, such as groups)")
	fs.StringVar(&f.subject, "console-oidc-subject-claim", "sub", "the ID token `claim` that names the person")
	fs.StringVar(&f.groups, "console-oidc-groups-claim", console.DefaultGroupsClaim, "the ID token `claim` holding the person's groups")
	fs.StringVar(&f.postLogout, "console-oidc-post-logout-url", "", "if set, signing out of the console signs out of the provider too, which then sends the browser to this `URL` (registered with the provider)")
}

// config is the console's OIDC sign-in, or nil without an issuer.
func (f *oidcFlags) config(getenv func(string) string) (*console.OIDC, error) {
	if f.issuer == "" {
		return nil, nil
	}
	if f.clientID == "" || f.redirect == "" {
		return nil, fmt.Errorf("--console-oidc-issuer needs --console-oidc-client-id and --console-oidc-redirect-url")
	}
	var scopes []string
	for s := range strings.SplitSeq(f.scopes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			scopes = append(scopes, s)
		}
	}
	return &console.OIDC{IssuerURL: f.issuer, ClientID: f.clientID, ClientSecret: getenv(f.secretEnv), RedirectURL: f.redirect,
		Scopes: scopes, SubjectClaim: f.subject, GroupsClaim: f.groups, PostLogoutRedirectURL: f.postLogout}, nil
}

func (f *consoleFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.enabled, "console", false, "serve the web console at /ui/ (off unless set)")
	fs.StringVar(&f.secretEnv, "console-secret-env", "MARKOV_CONSOLE_SECRET", "the environment `variable` holding the secret people sign in to the console with")
	fs.StringVar(&f.header, "console-identity-header", "", "the request `header` an authenticating reverse proxy puts the person's identity in (the proxy must strip it from clients' requests)")
	f.oidc.register(fs)
}

// mount returns api alone, or api with the console at /ui/ when enabled,
// and the console (nil when disabled). The console takes decisions
// through the API's acceptor, limits sign-ins per the API's client key,
// and shows the deliveries of sender (if any). Its cookies are sent for
// the whole origin when shared is set, so that the AG-UI endpoint
// accepts its sign-in.
func (f *consoleFlags) mount(c *CLI, db *DB, api http.Handler, rc resumehttp.Config, sender *webhook.Sender, shared bool) (http.Handler, *console.Console, error) {
	if !f.enabled {
		return api, nil, nil
	}
	secret := c.getenv(f.secretEnv)
	oidc, err := f.oidc.config(c.getenv)
	if err != nil {
		return nil, nil, err
	}
	if secret == "" && f.header == "" && oidc == nil {
		return nil, nil, fmt.Errorf("--console needs $%s (a sign-in secret), --console-oidc-issuer or --console-identity-header", f.secretEnv)
	}
	cfg := console.Config{Runner: db.Runner, Acceptor: rc.Acceptor, Charter: c.Charter, Secret: []byte(secret), IdentityHeader: f.header, OIDC: oidc, Logger: c.Logger,
		ClientKey: rc.ClientKey} // the API's: behind trusted proxies, the forwarded address
	if l, ok := db.Store.(store.AuditLog); ok {
		cfg.Audit = l // the decide and machine pages show whether it verifies
	}
	if db.Fleet != nil {
		cfg.Fleet = db.Fleet // the fleet view (a nil *fleet.Fleet would not be a nil FleetView)
	}
	if sender != nil {
		cfg.Deliveries = sender // the deliveries page
	}
	if shared {
		cfg.CookiePath = "/"
	}
	ui, err := console.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(c.Out(), "the console is at %s\n", console.DefaultPrefix)
	// Routed by prefix, not by a ServeMux, which would redirect an unclean
	// API path with an HTML body before the API (all JSON) saw it.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, console.DefaultPrefix) || r.URL.Path == strings.TrimSuffix(console.DefaultPrefix, "/") {
			ui.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	}), ui, nil
}
