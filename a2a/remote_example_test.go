package a2a_test

import (
	"context"
	"fmt"
	"iter"
	"log"
	"net/http"
	"net/http/httptest"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/markov-agents/markov/a2a"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
)

// translator is a remote agent (built with the official Go SDK) that
// asks whether to be formal before it translates.
type translator struct{}

func (translator) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		if ec.StoredTask == nil {
			if !yield(sdk.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
			ask := sdk.NewMessageForTask(sdk.MessageRoleAgent, ec, sdk.NewTextPart("Formal or informal?"))
			yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateInputRequired, ask), nil)
			return
		}
		greeting := map[string]string{"formal": "Guten Tag", "informal": "Hallo"}[ec.Message.Parts[0].Text()]
		if yield(sdk.NewArtifactEvent(ec, sdk.NewTextPart(greeting)), nil) {
			yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateCompleted, nil), nil)
		}
	}
}

func (translator) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateCanceled, nil), nil)
	}
}

// A node delegates to a remote A2A agent. The agent asks a question
// (input-required): the call suspends, durably, with the agent's question
// as its reason; the answer — from any process sharing the store, hours
// later — goes on to the agent's task, and its result reaches the model.
func ExampleTool() {
	// The remote agent, with its card at the well-known path.
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(translator{})))
	mux.Handle("/.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(&sdk.AgentCard{
		Name: "Translator", Description: "translates into German", Version: "1",
		SupportedInterfaces: []*sdk.AgentInterface{sdk.NewAgentInterface(srv.URL+"/rpc", sdk.TransportProtocolJSONRPC)},
	}))

	// remote:begin
	ctx := context.Background()
	remote, err := a2a.NewRemote(a2a.Config{
		Name: "translator", URL: srv.URL,
		AllowPrivate: true, // the agent runs on this machine
		// PushURL: "https://markov.example.com/a2a/push", // where a2a.PushHandler is mounted
	})
	if err != nil {
		log.Fatal(err)
	}
	tool, err := a2a.Tool[struct{}](ctx, remote)
	if err != nil {
		log.Fatal(err)
	}
	desk, err := node.New("desk", node.Config[struct{}]{Tools: []node.Tool[struct{}]{tool}})
	if err != nil {
		log.Fatal(err)
	}
	charter, err := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(scripted.Tool("translator", a2a.Request{Message: "Hello"}), scripted.Text("Done.")),
		Nodes: []*node.Node{desk},
		Hooks: machine.Hooks{OnResolved: a2a.CancelHook(remote)}, // a cancelled call cancels the task
	})
	// remote:end
	if err != nil {
		log.Fatal(err)
	}
	runner, err := durable.New(durable.Config{Store: memstore.New(), Charter: charter})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := runner.Create(ctx, "m1", "desk", nil); err != nil {
		log.Fatal(err)
	}
	for _, err := range runner.Run(ctx, "m1", machine.UserText("Say hello in German.")) {
		if err != nil {
			log.Fatal(err)
		}
	}
	pending, err := runner.Pending(ctx, store.Filter{MachineID: "m1"})
	if err != nil {
		log.Fatal(err)
	}
	call, err := runner.Call(ctx, pending[0].ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(call.Reason)

	run, err := runner.Resume(ctx, machine.ResumeInput{SuspendID: call.SuspendID, Payload: "formal"})
	if err != nil {
		log.Fatal(err)
	}
	for step, err := range run.Steps() {
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range step.Messages {
			for _, p := range m.Parts {
				if p.Text != "" {
					fmt.Println(p.Text)
				}
			}
		}
	}
	// Output:
	// the agent Translator asks: Formal or informal?
	// Guten Tag
	// Done.
}
