package webhook_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/webhook"
)

type deploy struct{}

// A machine waits for CI; GitHub's check_suite webhook wakes it, and a
// redelivery of the same delivery changes nothing.
func Example() {
	ctx := context.Background()
	runner := deployRunner(memstore.New())
	if _, err := runner.Create(ctx, "release-7", "deploy", nil); err != nil {
		log.Fatal(err)
	}
	for _, err := range runner.Run(ctx, "release-7", machine.UserText("Deploy release 7 once CI passes.")) {
		if err != nil {
			log.Fatal(err)
		}
	}

	// webhook:route:begin
	h, err := webhook.New(webhook.Config{
		Acceptor: runner, // or a *fleet.Fleet
		Signaler: runner,
		Routes: []webhook.Route{{
			Path:    "/github",
			Scheme:  webhook.GitHub,
			Secrets: []string{"the secret set on the GitHub webhook"},
			Action:  webhook.Signal,
			Event:   webhook.Source{Header: "X-GitHub-Event", Prefix: "github."},
			Payload: "/check_suite/conclusion",
		}},
	})
	// webhook:route:end
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	// What GitHub sends, twice (a redelivery keeps X-GitHub-Delivery).
	body := []byte(`{"action":"completed","check_suite":{"conclusion":"success"}}`)
	m := hmac.New(sha256.New, []byte("the secret set on the GitHub webhook"))
	m.Write(body)
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/github", bytes.NewReader(body))
		req.Header.Set("X-GitHub-Event", "check_suite")
		req.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
		resp, err := srv.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		var res webhook.Result
		_ = json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, res.Event, "woke", *res.Woken)
	}
	if err := runner.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	st, err := runner.Status(ctx, "release-7")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.LastText)
	// Output:
	// 200 github.check_suite woke 1
	// 200 github.check_suite woke 1
	// CI says: success
}

// deployRunner is a runner on st whose "deploy" machines wait for CI in a
// tool, woken by the event github.check_suite.
func deployRunner(st store.Store) *durable.Runner {
	waitCI := node.NewTool("wait_for_ci", "Wait until CI passes.",
		func(ctx *node.ToolContext[deploy], _ struct{}) (string, error) {
			return "", ctx.Suspend("waiting for CI", instance.WithEvent("github.check_suite"))
		})
	n, err := node.New("deploy", node.Config[deploy]{Tools: []node.Tool[deploy]{waitCI}})
	if err != nil {
		log.Fatal(err)
	}
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == message.Tool {
			return scripted.Text("CI says: " + last.Parts[0].Text), nil
		}
		return scripted.Tool("wait_for_ci", struct{}{}), nil
	})
	charter, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
	if err != nil {
		log.Fatal(err)
	}
	runner, err := durable.New(durable.Config{Store: st, Charter: charter})
	if err != nil {
		log.Fatal(err)
	}
	return runner
}

// A Sender POSTs each suspension event to its subscriptions, signed per
// Standard Webhooks; Deliveries lists them with their state (on
// PostgreSQL, from their River jobs).
func ExampleSender_Deliveries() {
	ctx := context.Background()
	got := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev webhook.Event
		_ = json.NewDecoder(r.Body).Decode(&ev)
		got <- string(ev.Type) + " " + ev.Data.MachineID
	}))
	defer receiver.Close()

	st := memstore.New()
	sender, err := webhook.NewSender(webhook.SenderConfig{
		Store:        st,
		AllowPrivate: true, // the receiver is on loopback
		Subscriptions: []webhook.Subscription{{ID: "ops", URL: receiver.URL,
			Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Events: []webhook.EventType{webhook.SuspensionCreated}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sender.Run(runCtx) }()
	<-sender.Started()

	runner := deployRunner(st)
	if _, err := runner.Create(ctx, "release-8", "deploy", nil); err != nil {
		log.Fatal(err)
	}
	for _, err := range runner.Run(ctx, "release-8", machine.UserText("Deploy release 8 once CI passes.")) {
		if err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("received:", <-got)
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	ds, err := sender.Deliveries(ctx, "", 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range ds {
		fmt.Println(d.Subscription, d.Type, d.State, d.Attempts)
	}
	// Output:
	// received: suspension.created release-8
	// ops suspension.created delivered 1
}

// A subscription to machine.finished hears when a machine's run ends
// with nothing left to do, and what it answered.
func ExampleMachineFinished() {
	ctx := context.Background()
	got := make(chan webhook.Event, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev webhook.Event
		_ = json.NewDecoder(r.Body).Decode(&ev)
		got <- ev
	}))
	defer receiver.Close()

	st := memstore.New()
	sender, err := webhook.NewSender(webhook.SenderConfig{Store: st, AllowPrivate: true,
		Subscriptions: []webhook.Subscription{{ID: "done", URL: receiver.URL,
			Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Events: []webhook.EventType{webhook.MachineFinished}}}})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sender.Run(runCtx) }()
	<-sender.Started()

	runner := deployRunner(st)
	if _, err := runner.Create(ctx, "release-9", "deploy", nil); err != nil {
		log.Fatal(err)
	}
	var suspendID string
	for step, err := range runner.Run(ctx, "release-9", machine.UserText("Deploy release 9 once CI passes.")) {
		if err != nil {
			log.Fatal(err)
		}
		if step.NeedsResume() {
			suspendID = step.Suspensions[0].SuspendID
		}
	}
	run, err := runner.Resume(ctx, machine.ResumeInput{SuspendID: suspendID, Payload: "green"})
	if err != nil {
		log.Fatal(err)
	}
	for _, err := range run.Steps() {
		if err != nil {
			log.Fatal(err)
		}
	}
	ev := <-got
	fmt.Println(ev.Type, ev.Data.MachineID, ev.Data.Revision > 0)
	fmt.Println(ev.Data.Answer)
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// machine.finished release-9 true
	// CI says: green
}
