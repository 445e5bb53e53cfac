package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/webhook"
)

// Where serve mounts the webhooks: deliveries in under HooksPrefix
// (verified by each route's own signature scheme), the deliveries sent
// under DeliveriesPrefix (behind the API's signed requests).
const (
	HooksPrefix      = "/hooks"
	DeliveriesPrefix = "/webhooks"
)

// webhookFile is serve's --webhooks file: JSON with the routes that
// take deliveries in and the subscriptions that receive events. A secret
// written "env:NAME" is read from the environment variable NAME.
type webhookFile struct {
	Routes        []fileRoute            `json:"routes"`
	Subscriptions []webhook.Subscription `json:"subscriptions"`
	// AllowPrivate lets subscriptions reach private and loopback
	// addresses.
	AllowPrivate bool `json:"allow_private"`
	// MaxAttempts and Backoff ("5s") tune the retries of deliveries.
	MaxAttempts int    `json:"max_attempts"`
	Backoff     string `json:"backoff"`
}

// fileRoute is a webhook.Route with its tolerance written as a Go
// duration ("5m").
type fileRoute struct {
	webhook.Route
	Tolerance string `json:"tolerance,omitempty"`
}

// readWebhooks reads and checks the --webhooks file at path.
func (c *CLI) readWebhooks(path string) (*webhookFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Usagef("serve", "--webhooks: %v", err)
	}
	var f webhookFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, Usagef("serve", "--webhooks %s: %v", path, err)
	}
	secret := func(s string) (string, error) {
		name, ok := strings.CutPrefix(s, "env:")
		if !ok {
			return s, nil
		}
		if v := c.getenv(name); v != "" {
			return v, nil
		}
		return "", Usagef("serve", "--webhooks %s: $%s is not set", path, name)
	}
	for i := range f.Routes {
		rt := &f.Routes[i]
		if rt.Tolerance != "" {
			if rt.Route.Tolerance, err = time.ParseDuration(rt.Tolerance); err != nil {
				return nil, Usagef("serve", "--webhooks %s: route %s: tolerance: %v", path, rt.Path, err)
			}
		}
		for j, s := range rt.Secrets {
			if rt.Secrets[j], err = secret(s); err != nil {
				return nil, err
			}
		}
	}
	for i := range f.Subscriptions {
		if f.Subscriptions[i].Secret, err = secret(f.Subscriptions[i].Secret); err != nil {
			return nil, err
		}
	}
	return &f, nil
}

// newSender returns the sender of f's subscriptions (nil without any):
// on PostgreSQL its deliveries are River jobs.
func (c *CLI) newSender(f *webhookFile, db *DB) (*webhook.Sender, error) {
	if f == nil || len(f.Subscriptions) == 0 {
		return nil, nil
	}
	cfg := webhook.SenderConfig{Store: db.Store, Subscriptions: f.Subscriptions, AllowPrivate: f.AllowPrivate,
		MaxAttempts: f.MaxAttempts, Logger: c.Logger}
	if f.Backoff != "" {
		d, err := time.ParseDuration(f.Backoff)
		if err != nil {
			return nil, Usagef("serve", "--webhooks: backoff: %v", err)
		}
		cfg.Backoff = d
	}
	return webhook.NewSender(cfg)
}

// mountWebhooks serves the webhook routes of f under HooksPrefix and the
// deliveries of sender (if any) under DeliveriesPrefix beside h.
func (c *CLI) mountWebhooks(f *webhookFile, sender *webhook.Sender, db *DB, rc resumehttp.Config, api *resumehttp.Handler, h http.Handler) (http.Handler, error) {
	var in, out http.Handler
	if len(f.Routes) > 0 {
		cfg := webhook.Config{Acceptor: db.Runner, Signaler: db.Runner, Replays: db.Runner.ReplayGuard(),
			MaxBody: rc.MaxBody, FailureBurst: rc.FailureBurst, FailureRefill: rc.FailureRefill, ClientKey: rc.ClientKey, Logger: c.Logger}
		if db.Fleet != nil {
			cfg.Acceptor, cfg.Signaler = db.Fleet, db.Fleet // committed with their jobs, for any worker
		}
		for _, rt := range f.Routes {
			cfg.Routes = append(cfg.Routes, rt.Route)
		}
		wh, err := webhook.New(cfg)
		if err != nil {
			return nil, err
		}
		in = http.StripPrefix(HooksPrefix, wh)
		fmt.Fprintf(c.Out(), "webhooks in: %d routes under %s\n", len(cfg.Routes), HooksPrefix)
	}
	if sender != nil {
		out = api.Protect(http.StripPrefix(DeliveriesPrefix, sender.Handler()))
		fmt.Fprintf(c.Out(), "webhooks out: %d subscriptions, deliveries at %s/deliveries\n", len(f.Subscriptions), DeliveriesPrefix)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case in != nil && strings.HasPrefix(r.URL.Path, HooksPrefix+"/"):
			in.ServeHTTP(w, r)
		case out != nil && strings.HasPrefix(r.URL.Path, DeliveriesPrefix+"/"):
			out.ServeHTTP(w, r)
		default:
			h.ServeHTTP(w, r)
		}
	}), nil
}

// runSender runs s (if any) until the returned stop is called.
func runSender(ctx context.Context, s *webhook.Sender, log func(error)) (stop func()) {
	if s == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log(err)
		}
	}()
	return func() { cancel(); <-done }
}
