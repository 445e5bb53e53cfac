// Command approvalservice is an HTTP approval service and its webhook
// client. The service runs the refund agent of the approval example on a
// SQLite file through a durable.Runner and serves resumehttp's signed
// endpoints; the client is what a manager's tool (a form backend, a chat
// bot, a CI job) runs to send a decision: a signed POST
// /suspensions/{id}/resume.
//
// With no arguments it runs both over a real TCP connection: a customer's
// request suspends for a manager's approval, the client approves it, and
// the service answers with the run's summary.
//
//	go run ./examples/approvalservice
//
// Or as two processes, sharing a secret of at least 32 bytes:
//
//	export MARKOV_SECRET=$(openssl rand -hex 32)
//	go run ./examples/approvalservice serve 127.0.0.1:8080 refunds.db
//	go run ./examples/approvalservice decide http://127.0.0.1:8080 <suspend-id> true dana
//
// The service prints the suspend ID of the refund it starts. The model is
// scripted, so it runs offline.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store/sqlite"
)

const usage = `usage:
  approvalservice                                         the service and its client, in one process
  approvalservice serve ADDR FILE.db                      the service ($MARKOV_SECRET)
  approvalservice decide URL SUSPEND-ID true|false NAME   the client: send a manager's decision ($MARKOV_SECRET)`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv("MARKOV_SECRET"), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "approvalservice:", err)
		os.Exit(1)
	}
}

// run is the command.
func run(ctx context.Context, args []string, secret string, w io.Writer) error {
	switch {
	case len(args) == 0:
		return demo(ctx, w)
	case len(args) == 3 && args[0] == "serve":
		return serve(ctx, args[1], args[2], []byte(secret), w)
	case len(args) == 5 && args[0] == "decide":
		approved, err := strconv.ParseBool(args[3])
		if err != nil {
			return fmt.Errorf("decision %q: want true or false", args[3])
		}
		c := Client{BaseURL: args[1], Secret: []byte(secret)}
		sum, err := c.Resume(ctx, args[2], refund.Approval{Approved: approved, Manager: args[4]})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "done: %v, steps %v: %s\n", sum.Done, sum.Steps, sum.Text)
		return nil
	}
	return errors.New(usage)
}

// Service is the approval service: a durable runner on a SQLite file and
// the signed HTTP endpoints in front of it.
type Service struct {
	Runner  *durable.Runner
	Handler http.Handler
	close   func() error
}

// approvalservice:service:begin

// Open opens the service on the SQLite file at path, with the secret its
// clients sign with.
func Open(ctx context.Context, path string, secret []byte) (*Service, error) {
	charter, err := refund.NewCharter(refund.ScriptedModel())
	if err != nil {
		return nil, err
	}
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		return nil, err
	}
	runner, err := durable.New(durable.Config{Store: s, Charter: charter})
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	h, err := resumehttp.New(resumehttp.Config{Runner: runner, Secret: secret})
	if err != nil {
		return nil, errors.Join(err, s.Close()) // a weak secret: resumehttp.ErrWeakSecret
	}
	return &Service{Runner: runner, Handler: h, close: s.Close}, nil
}

// approvalservice:service:end

// Close closes the service's database.
func (s *Service) Close() error { return s.close() }

// Start creates a machine for a customer's refund request and runs it
// until it waits for a manager; it returns the suspend ID.
func (s *Service) Start(ctx context.Context) (string, error) {
	id, err := s.Runner.Create(ctx, "", refund.NodeName, nil)
	if err != nil {
		return "", err
	}
	var suspendID string
	for step, err := range s.Runner.Run(ctx, id, machine.UserText(refund.CustomerRequest)) {
		if err != nil {
			return "", err
		}
		for _, c := range step.Suspensions {
			suspendID = c.SuspendID
		}
	}
	if suspendID == "" {
		return "", errors.New("the run ended without waiting for a manager")
	}
	return suspendID, nil
}

// serve runs the service on addr until ctx is done.
func serve(ctx context.Context, addr, path string, secret []byte, w io.Writer) (err error) {
	svc, err := Open(ctx, path, secret)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, svc.Close()) }()
	id, err := svc.Start(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "refund waiting for a manager: suspend ID %s\n", id)
	srv := resumehttp.NewServer(addr, svc.Handler, resumehttp.ServerConfig{})
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	fmt.Fprintf(w, "serving on http://%s\n", addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// demo runs the service on a free local port and approves its refund
// with the client.
func demo(ctx context.Context, w io.Writer) (err error) {
	dir, err := os.MkdirTemp("", "markov-approvalservice-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	secret := []byte("demo secret: 32 random bytes in production (openssl rand -hex 32)")
	svc, err := Open(ctx, filepath.Join(dir, "refunds.db"), secret)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, svc.Close()) }()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := resumehttp.NewServer("", svc.Handler, resumehttp.ServerConfig{})
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()

	id, err := svc.Start(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "refund waiting for a manager")
	c := Client{BaseURL: "http://" + l.Addr().String(), Secret: secret}
	sum, err := c.Resume(ctx, id, refund.Approval{Approved: true, Manager: "dana"})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "approved by dana over HTTP; the run is done: %v\nassistant: %s\n", sum.Done, sum.Text)
	return nil
}

// approvalservice:client:begin

// Client sends managers' decisions to an approval service.
type Client struct {
	BaseURL string           // the service, e.g. https://approvals.example.com
	Secret  []byte           // shared with the service
	HTTP    *http.Client     // http.DefaultClient if nil
	Clock   func() time.Time // time.Now if nil; signatures expire
}

// Resume resumes suspension id with payload (for the refund agent, a
// refund.Approval) and returns the summary of the run it started. A
// payload the service refuses is a *RefusedError.
func (c Client) Resume(ctx context.Context, id string, payload any) (resumehttp.Summary, error) {
	var sum resumehttp.Summary
	raw, err := json.Marshal(payload)
	if err != nil {
		return sum, err
	}
	return sum, c.post(ctx, "/suspensions/"+id+"/resume", resumehttp.ResumeRequest{Payload: raw}, &sum)
}

// post sends body, signed, to path and decodes the answer into out.
func (c Client) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	now := time.Now
	if c.Clock != nil {
		now = c.Clock
	}
	resumehttp.SignRequest(c.Secret, req, b, now())
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e resumehttp.ErrorBody
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			return fmt.Errorf("%s %s: %s", req.Method, path, resp.Status)
		}
		return &RefusedError{Status: resp.StatusCode, Code: e.Code, Message: e.Error}
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// RefusedError is a request the service refused: 400 payload_decode for
// a decision that is not an Approval, 401 for a bad signature, 404 for an
// unknown suspension, 409 already_resolved when someone decided first.
type RefusedError struct {
	Status        int
	Code, Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused (%d %s): %s", e.Status, e.Code, e.Message)
}

// approvalservice:client:end
