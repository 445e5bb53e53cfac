package agui_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/markov-agents/markov/agui"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store/memstore"
)

// A charter whose refund tool waits for a manager, served to AG-UI
// frontends: the run that suspends ends with an interrupt, and the next
// run's resume entry answers it.
func ExampleNew() {
	type order struct {
		ID string `json:"id"`
	}
	type approval struct {
		Approved bool `json:"approved"`
	}
	refund := node.NewTool("refund", "Refund an order, once a manager approves.",
		func(ctx *node.ToolContext[struct{}], in order) (string, error) {
			return "", ctx.Suspend("Refund order " + in.ID + "?")
		},
		node.OnResume(func(_ *node.ToolContext[struct{}], in order, r node.Resumed[approval]) (string, error) {
			if !r.Payload.Approved {
				return "refund refused", nil
			}
			return "order " + in.ID + " refunded", nil
		}))
	desk, err := node.New("desk", node.Config[struct{}]{Tools: []node.Tool[struct{}]{refund}})
	if err != nil {
		log.Fatal(err)
	}
	model := scripted.New(scripted.Tools(scripted.Call{ID: "call-1", Name: "refund", Input: order{ID: "42"}}), scripted.Text("Done."))
	charter, err := machine.NewCharter(machine.CharterConfig{Name: "desk", Model: model, Nodes: []*node.Node{desk}})
	if err != nil {
		log.Fatal(err)
	}
	runner, err := durable.New(durable.Config{Store: memstore.New(), Charter: charter})
	if err != nil {
		log.Fatal(err)
	}
	// agui:new:begin
	h, err := agui.New(agui.Config{Runner: runner, Node: "desk"}) // Auth: api.Protect, behind the HTTP API's signatures
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	// agui:new:end
	srv := httptest.NewServer(h)
	defer srv.Close()

	var interrupt string
	show := func(body string) {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() {
			data, ok := strings.CutPrefix(lines.Text(), "data: ")
			if !ok {
				continue
			}
			var e struct {
				Type    string `json:"type"`
				Delta   string `json:"delta"`
				Name    string `json:"toolCallName"`
				Outcome *struct {
					Type       string `json:"type"`
					Interrupts []struct {
						ID, Message, ToolCallID string
					} `json:"interrupts"`
				} `json:"outcome"`
			}
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				log.Fatal(err)
			}
			switch {
			case e.Type == "TOOL_CALL_START":
				fmt.Println(e.Type, e.Name)
			case e.Type == "TEXT_MESSAGE_CONTENT":
				fmt.Println(e.Type, e.Delta)
			case e.Outcome != nil && e.Outcome.Type == "interrupt":
				in := e.Outcome.Interrupts[0]
				interrupt = in.ID
				fmt.Println(e.Type, "interrupt:", in.Message, "for", in.ToolCallID)
			case e.Outcome != nil:
				fmt.Println(e.Type, e.Outcome.Type)
			}
		}
	}
	show(`{"threadId":"thread-1","runId":"run-1","messages":[{"id":"m1","role":"user","content":"refund order 42"}]}`)
	show(`{"threadId":"thread-1","runId":"run-2","messages":[],"resume":[{"interruptId":"` + interrupt + `","status":"resolved","payload":{"approved":true}}]}`)
	// Output:
	// TOOL_CALL_START refund
	// RUN_FINISHED interrupt: Refund order 42? for call-1
	// TEXT_MESSAGE_CONTENT Done.
	// RUN_FINISHED success
}
