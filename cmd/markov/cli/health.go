package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/markov-agents/markov/store"
)

// readyTimeout bounds the store check of GET /readyz.
const readyTimeout = 5 * time.Second

// withProbes serves h with the unauthenticated probes in front of it:
// GET /healthz answers 200 "ok" while the process serves; GET /readyz
// answers 200 "ok" when st can serve (its [store.Pinger] check passes, if
// it has one) and 503 with the reason when it cannot.
func withProbes(h http.Handler, st store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		switch r.URL.Path {
		case "/healthz":
			fmt.Fprintln(w, "ok")
		case "/readyz":
			if p, ok := st.(store.Pinger); ok {
				ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
				defer cancel()
				if err := p.Ping(ctx); err != nil {
					http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
					return
				}
			}
			fmt.Fprintln(w, "ok")
		default:
			// Not a ServeMux: one would answer an unclean path (//x,
			// /a/../b) with its own HTML redirect before h, whose answers
			// are all JSON, saw it.
			h.ServeHTTP(w, r)
		}
	})
}
