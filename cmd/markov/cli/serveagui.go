package cli

import (
	"flag"
	"fmt"
	"net/http"
	"strings"

	"github.com/markov-agents/markov/agui"
	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/resumehttp"
)

// aguiFlags are serve's flags for the AG-UI endpoint.
type aguiFlags struct {
	path    string
	node    string
	origins string
}

func (f *aguiFlags) register(fs *flag.FlagSet, node string) {
	fs.StringVar(&f.path, "agui", "", "serve the AG-UI endpoint at `path` (for example /agui; off if empty), behind the API's signed requests or, with --console, the console's sign-in")
	fs.StringVar(&f.node, "agui-node", node, "the `node` new AG-UI threads start at")
	fs.StringVar(&f.origins, "agui-origins", "", "comma-separated `origins` of the browser frontends allowed to call the AG-UI endpoint (CORS; * for any)")
}

// check checks the flags of command cmd.
func (f *aguiFlags) check(cmd string) error {
	switch {
	case f.path == "":
		return nil
	case !strings.HasPrefix(f.path, "/") || strings.HasSuffix(f.path, "/") && f.path != "/":
		return Usagef(cmd, "--agui %q: want a path like /agui", f.path)
	case f.node == "":
		return Usagef(cmd, "--agui needs --agui-node (the node new threads start at)")
	}
	return nil
}

// mount returns next with the AG-UI endpoint at its path, behind api's
// authentication — or the console's sign-in, when ui is set — when
// enabled, and the function that stops the runs it started (nothing to
// stop when disabled).
func (f *aguiFlags) mount(c *CLI, db *DB, api *resumehttp.Handler, ui *console.Console, next http.Handler) (http.Handler, func(), error) {
	if f.path == "" {
		return next, func() {}, nil
	}
	var origins []string
	for o := range strings.SplitSeq(f.origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	cfg := agui.Config{Runner: db.Runner, Node: f.node, Auth: api.Protect, AllowOrigins: origins, Logger: c.Logger}
	if ui != nil {
		// People signed in to the console use it too (a page on the
		// same origin), their answers in their name.
		cfg.Auth, cfg.Identity = ui.SessionOr(api.Protect), ui.Identity
	}
	h, err := agui.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(c.Out(), "the AG-UI endpoint is at %s\n", f.path)
	return routeAt(f.path, h, next), h.Close, nil
}

// routeAt serves the requests for path with h, the others with next.
func routeAt(path string, h, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
