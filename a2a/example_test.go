package a2a_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	markova2a "github.com/markov-agents/markov/a2a"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store/memstore"
)

// A charter whose refund tool waits for a manager, served as an A2A
// agent: the task the first message starts is input-required, with the
// tool's question and its payload schema; the client's next message on
// the task is the manager's answer, and the task completes with the
// run's answer as an artifact.
func ExampleNewServer() {
	type order struct {
		ID string `json:"id"`
	}
	type approval struct {
		Approved bool `json:"approved"`
	}
	refund := node.NewTool("refund", "Refund an order, once a manager approves.",
		func(ctx *node.ToolContext[struct{}], in order) (string, error) {
			return "", ctx.Suspend("Refund order " + in.ID + "?")
		}, node.ResumeWith[approval]())
	desk, err := node.New("desk", node.Config[struct{}]{Tools: []node.Tool[struct{}]{refund}})
	if err != nil {
		log.Fatal(err)
	}
	model := scripted.New(scripted.Tool("refund", order{ID: "42"}), scripted.Text("Done: order 42 refunded."))
	charter, err := machine.NewCharter(machine.CharterConfig{Name: "desk", Model: model, Nodes: []*node.Node{desk}})
	if err != nil {
		log.Fatal(err)
	}
	// a2a-server:begin
	st := memstore.New() // or SQLite, or PostgreSQL: every store keeps records
	runner, err := durable.New(durable.Config{Store: st, Charter: charter})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := markova2a.NewServer(markova2a.ServerConfig{Runner: runner, Node: "desk", Records: st})
	if err != nil {
		log.Fatal(err)
	}
	// srv is an http.Handler: the agent card, JSON-RPC at /, HTTP+JSON at /rest.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go srv.Run(ctx) // push notifications from the outbox, tasks decided elsewhere
	// a2a-server:end
	hs := httptest.NewServer(srv)
	defer hs.Close()

	card, err := agentcard.DefaultResolver.Resolve(ctx, hs.URL)
	if err != nil {
		log.Fatal(err)
	}
	client, err := a2aclient.NewFromCard(ctx, card)
	if err != nil {
		log.Fatal(err)
	}
	res, err := client.SendMessage(ctx, &a2a.SendMessageRequest{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Please refund order 42.")),
	})
	if err != nil {
		log.Fatal(err)
	}
	task := res.(*a2a.Task)
	fmt.Println(task.Status.State, "-", task.Status.Message.Parts[0].Text())
	fmt.Println("schema:", task.Status.Message.Parts[1].Data().(map[string]any)["schema"].(map[string]any)["required"])

	// a2a-answer:begin
	answer := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewDataPart(map[string]any{"approved": true}))
	res, err = client.SendMessage(ctx, &a2a.SendMessageRequest{Message: answer})
	// a2a-answer:end
	if err != nil {
		log.Fatal(err)
	}
	task = res.(*a2a.Task)
	fmt.Println(task.Status.State, "-", task.Artifacts[0].Parts[0].Text())
	// Output:
	// TASK_STATE_INPUT_REQUIRED - Refund order 42?
	// schema: [approved]
	// TASK_STATE_COMPLETED - Done: order 42 refunded.
}
