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
}

func (f *consoleFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.enabled, "console", false, "serve the web console at /ui/ (off unless set)")
	fs.StringVar(&f.secretEnv, "console-secret-env", "MARKOV_CONSOLE_SECRET", "the environment `variable` holding the secret people sign in to the console with")
	fs.StringVar(&f.header, "console-identity-header", "", "the request `header` an authenticating reverse proxy puts the person's identity in (the proxy must strip it from clients' requests)")
}

// mount returns api alone, or api with the console at /ui/ when enabled.
// The console takes decisions through the API's acceptor, limits
// sign-ins per the API's client key, and shows the deliveries of sender
// (if any).
func (f *consoleFlags) mount(c *CLI, db *DB, api http.Handler, rc resumehttp.Config, sender *webhook.Sender) (http.Handler, error) {
	if !f.enabled {
		return api, nil
	}
	secret := c.getenv(f.secretEnv)
	if secret == "" && f.header == "" {
		return nil, fmt.Errorf("--console needs $%s (a sign-in secret) or --console-identity-header", f.secretEnv)
	}
	cfg := console.Config{Runner: db.Runner, Acceptor: rc.Acceptor, Charter: c.Charter, Secret: []byte(secret), IdentityHeader: f.header, Logger: c.Logger,
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
	ui, err := console.New(cfg)
	if err != nil {
		return nil, err
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
	}), nil
}
