package resumehttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store/memstore"
)

type refundDesk struct{}

type refundIn struct {
	Order int `json:"order"`
}

// A tool waits for a manager; the manager's answer arrives over HTTP, in
// a signed request, and the machine runs to the end of its turn.
func Example() {
	ctx := context.Background()

	// The agent: a tool that suspends, and a model that asks for approval,
	// then reports the manager's answer.
	approve := node.NewTool("approve", "Ask a manager to approve a refund.",
		func(ctx *node.ToolContext[refundDesk], in refundIn) (string, error) {
			return "", ctx.Suspend(fmt.Sprintf("approve the refund of order %d", in.Order))
		})
	desk, err := node.New("desk", node.Config[refundDesk]{Tools: []node.Tool[refundDesk]{approve}})
	if err != nil {
		log.Fatal(err)
	}
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == message.Tool {
			return scripted.Text("The manager says: " + last.Parts[0].Text), nil
		}
		return scripted.Tool("approve", refundIn{Order: 42}), nil
	})
	charter, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{desk}})
	if err != nil {
		log.Fatal(err)
	}
	runner, err := durable.New(durable.Config{Store: memstore.New(), Charter: charter})
	if err != nil {
		log.Fatal(err)
	}

	// Run a machine until the tool suspends.
	id, err := runner.Create(ctx, "refund-42", "desk", nil)
	if err != nil {
		log.Fatal(err)
	}
	var suspendID string
	for step, err := range runner.Run(ctx, id, machine.UserText("Refund order 42, please.")) {
		if err != nil {
			log.Fatal(err)
		}
		for _, c := range step.Suspensions {
			suspendID = c.SuspendID
			fmt.Println("waiting:", c.Reason)
		}
	}

	// Serve the endpoints.
	secret := []byte("a secret of at least 32 random bytes, hex for example")
	h, err := resumehttp.New(resumehttp.Config{Runner: runner, Secret: secret})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	// The manager's client: a signed POST with the answer.
	body, _ := json.Marshal(resumehttp.ResumeRequest{Payload: json.RawMessage(`"approved"`)})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		srv.URL+"/suspensions/"+suspendID+"/resume", bytes.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resumehttp.SignRequest(secret, req, body, time.Now())
	resp, err := srv.Client().Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var sum resumehttp.Summary
	if err := json.NewDecoder(resp.Body).Decode(&sum); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, sum.MachineID, sum.Steps, "done:", sum.Done, "pending:", len(sum.Pending))
	fmt.Println(sum.Text)
	// Output:
	// waiting: approve the refund of order 42
	// 200 refund-42 [end_turn] done: true pending: 0
	// The manager says: approved
}
