// Command a2adelegation shows delegation over the Agent2Agent protocol
// between two markov services, each on a SQLite file of its own:
//
//   - "legal" is a charter served as an A2A agent (a2a.NewServer): its
//     review tool waits for a lawyer's sign-off, a decision made in its
//     console or over its HTTP API — so its A2A task is auth-required;
//   - "desk" is a charter whose tool is the legal agent (a2a.NewRemote,
//     a2a.Tool): the call sends the request, sees the task waiting, and
//     suspends durably — no goroutine, no open connection — until legal's
//     push notification reaches desk's endpoint (a2a.PushHandler).
//
// The lawyer signs off (here a Go resume on legal's runner, as its console
// or markov serve's HTTP API would); legal's task completes, its server
// sends the push notification from its outbox (Server.Run), desk's call
// wakes, reads the task, and desk answers.
//
//	go run ./examples/a2adelegation
//
// The models are scripted, so it runs offline. Both services listen on
// loopback, which the SSRF guards refuse unless told otherwise
// (AllowPrivate, AllowPrivatePush).
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/markov-agents/markov/a2a"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/sqlite"
)

func main() {
	dir, err := os.MkdirTemp("", "a2adelegation")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := run(context.Background(), dir, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// delegate is a scripted model that calls tool with input, then answers
// with the tool's result after prefix.
func delegate(tool string, input any, prefix string) llm.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == message.Tool {
			return scripted.Text(prefix + last.Parts[0].Text), nil
		}
		return scripted.Tool(tool, input), nil
	})
}

// legal is the remote agent's service: its charter served over A2A.
func legal(ctx context.Context, dir string) (*durable.Runner, *a2a.Server, func(), error) {
	review := node.NewTool("review", "Have a lawyer sign the contract off.", func(ctx *node.ToolContext[struct{}], _ struct{}) (string, error) {
		// Decided elsewhere: in legal's console or over its HTTP API.
		return "", ctx.Suspend("sign off the supplier contract", instance.WithMetadata(map[string]any{a2a.DecidedElsewhere: true}))
	})
	n, err := node.New("legal", node.Config[struct{}]{Instructions: "Review contracts.", Tools: []node.Tool[struct{}]{review}})
	if err != nil {
		return nil, nil, nil, err
	}
	charter, err := machine.NewCharter(machine.CharterConfig{Name: "legal", Model: delegate("review", struct{}{}, "Reviewed: "), Nodes: []*node.Node{n}})
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "legal.db")})
	if err != nil {
		return nil, nil, nil, err
	}
	runner, err := durable.New(durable.Config{Store: st, Charter: charter})
	if err != nil {
		return nil, nil, nil, err
	}
	srv, err := a2a.NewServer(a2a.ServerConfig{Runner: runner, Node: "legal", Records: st, AllowPrivatePush: true})
	if err != nil {
		return nil, nil, nil, err
	}
	return runner, srv, func() { _ = st.Close() }, nil
}

// desk is the calling service: its tool is the legal agent, woken by
// push notifications posted to pushURL.
func desk(ctx context.Context, dir, legalURL, pushURL string) (*durable.Runner, func(), error) {
	remote, err := a2a.NewRemote(a2a.Config{Name: "legal", URL: legalURL, PushURL: pushURL, AllowPrivate: true})
	if err != nil {
		return nil, nil, err
	}
	tool, err := a2a.Tool[struct{}](ctx, remote)
	if err != nil {
		return nil, nil, err
	}
	n, err := node.New("desk", node.Config[struct{}]{Instructions: "Get contracts reviewed.", Tools: []node.Tool[struct{}]{tool}})
	if err != nil {
		return nil, nil, err
	}
	charter, err := machine.NewCharter(machine.CharterConfig{Name: "desk", Nodes: []*node.Node{n},
		Model: delegate("legal", a2a.Request{Message: "Please review the supplier contract."}, "Legal says: "),
		Hooks: machine.Hooks{OnResolved: a2a.CancelHook(remote)}})
	if err != nil {
		return nil, nil, err
	}
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "desk.db")})
	if err != nil {
		return nil, nil, err
	}
	runner, err := durable.New(durable.Config{Store: st, Charter: charter})
	if err != nil {
		return nil, nil, err
	}
	return runner, func() { _ = st.Close() }, nil
}

// run runs the delegation with its databases in dir, printing to w.
func run(ctx context.Context, dir string, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	legalRunner, legalSrv, closeLegal, err := legal(ctx, dir)
	if err != nil {
		return err
	}
	defer closeLegal()
	legalHTTP := httptest.NewServer(legalSrv)
	defer legalHTTP.Close()
	sent := make(chan struct{})
	go func() { defer close(sent); _ = legalSrv.Run(ctx) }() // the outbox of push notifications
	defer func() { cancel(); <-sent }()

	// Desk's push endpoint: its URL goes into desk's tool, the handler
	// needs desk's runner.
	var push http.Handler
	deskHTTP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { push.ServeHTTP(w, r) }))
	defer deskHTTP.Close()
	deskRunner, closeDesk, err := desk(ctx, dir, legalHTTP.URL, deskHTTP.URL+"/a2a/push")
	if err != nil {
		return err
	}
	defer closeDesk()
	push = a2a.PushHandler(deskRunner, nil)

	// Desk's machine delegates: its call suspends, waiting on legal's task.
	id, err := deskRunner.Create(ctx, "", "desk", nil)
	if err != nil {
		return err
	}
	for step, err := range deskRunner.Run(ctx, id, machine.UserText("Get the supplier contract reviewed.")) {
		if err != nil {
			return err
		}
		for _, s := range step.Suspensions {
			fmt.Fprintf(w, "desk waits: %s\n", s.Reason)
		}
	}
	// Watch desk's machine to tell when it is done.
	done := make(chan struct{})
	at, err := deskRunner.LoadAt(ctx, id)
	if err != nil {
		return err
	}
	go func() {
		for ev, err := range deskRunner.Watch(ctx, id, at.EventSeq) {
			if err != nil {
				return
			}
			if ev.Kind == machine.EventStep && ev.Step != nil && ev.Step.Done && len(ev.Step.Suspensions) == 0 {
				close(done)
				return
			}
		}
	}()

	// The lawyer signs off in legal's service.
	pending, err := legalRunner.Pending(ctx, store.Filter{})
	if err != nil {
		return err
	}
	if len(pending) != 1 {
		return fmt.Errorf("legal waits on %d suspensions, want 1", len(pending))
	}
	fmt.Fprintf(w, "legal waits: %s\n", pending[0].Reason)
	for _, err := range legalRunner.Run(ctx, pending[0].MachineID, machine.ResumeInput{SuspendID: pending[0].ID, Payload: "approved by the lawyer"}) {
		if err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "the lawyer signed off")
	<-done // legal's push notification woke desk's call, and desk answered
	st, err := deskRunner.Status(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "desk: %s\n", st.LastText)
	return nil
}
