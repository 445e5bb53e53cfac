// Package acpdemo is the charter of the ACP demo: a deterministic "desk"
// agent on the scripted model, one tool per kind of wait the ACP agent
// shows, so that an ACP client (an editor, or the end-to-end test's
// TypeScript client) sees every path offline:
//
//   - "deploy SERVICE": the deploy tool waits for a yes or a no (a bool
//     payload) — a session/request_permission;
//   - "refund ORDER": the refund tool waits for an Approval (a boolean and
//     the manager's name) — a session/request_permission too;
//   - "ask QUESTION": the ask tool waits for an Answer (text) — a pending
//     tool call, resumed with session/resume and an input;
//   - "wait EVENT": the wait tool parks until EVENT is signalled — a
//     self-park, announced with session/await_resumption;
//   - "work N": N rounds of the work tool, each after a short latency —
//     time for a session/suspend to land mid-turn;
//   - anything else: a reply streamed in small chunks.
//
// After a tool result, the model reports it; in a fresh turn (a resume
// with continueTranscript false) it says so first.
package acpdemo

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"encoding/json"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// Names of the charter.
const (
	// CharterName is the charter's name.
	CharterName = "desk"
	// NodeName is the node sessions start at.
	NodeName = "desk"
)

// Desk is the node's state: what was deployed and refunded.
type Desk struct {
	Deployed []string `json:"deployed"`
	Refunded []string `json:"refunded"`
}

// Service is the deploy tool's input.
type Service struct {
	Name string `json:"name" jsonschema:"the service to deploy"`
}

// Order is the refund tool's input.
type Order struct {
	ID string `json:"id" jsonschema:"the order to refund"`
}

// Approval is a manager's decision on a refund.
type Approval struct {
	Approved bool   `json:"approved" jsonschema:"true to refund"`
	Manager  string `json:"manager" jsonschema:"who decided"`
}

// Question is the ask tool's input.
type Question struct {
	Text string `json:"text" jsonschema:"the question for a human"`
}

// Answer is a human's answer to a question.
type Answer struct {
	Text string `json:"text" jsonschema:"the answer"`
}

// Wait is the wait tool's input.
type Wait struct {
	Event string `json:"event" jsonschema:"the event to wait for"`
}

// Work is the work tool's input: round N of Of.
type Work struct {
	N  int `json:"n"`
	Of int `json:"of"`
}

// WorkLatency is how long the model takes before each reply of "work N".
const WorkLatency = 40 * time.Millisecond

// NewCharter returns the desk charter on model (ScriptedModel for the
// demo).
func NewCharter(model llm.Model) (*machine.Charter, error) {
	desk, err := node.New(NodeName, node.Config[Desk]{
		Instructions: "Help with deploys, refunds, questions and waits.",
		Tools:        []node.Tool[Desk]{deployTool(), refundTool(), askTool(), waitTool(), workTool()},
	})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{
		Name:  CharterName,
		Model: model,
		Nodes: []*node.Node{desk},
	})
}

// decided returns the options of a tool that a human's decision D
// resumes: decide returns the tool's result for the decision and the
// change it makes to the desk, if any.
func decided[In, D any](decide func(in In, d D) (string, func(*Desk))) []node.ToolOption {
	return []node.ToolOption{
		node.OnResume(func(ctx *node.ToolContext[Desk], in In, r node.Resumed[D]) (string, error) {
			result, change := decide(in, r.Payload)
			if change != nil {
				if err := ctx.Update(change); err != nil {
					return "", err
				}
			}
			return result, nil
		}),
	}
}

func deployTool() node.Tool[Desk] {
	return node.NewTool("deploy", "Deploy a service, once a human agrees.",
		func(ctx *node.ToolContext[Desk], in Service) (string, error) {
			return "", ctx.Suspend("deploy " + in.Name + "?")
		},
		decided(func(in Service, yes bool) (string, func(*Desk)) {
			if !yes {
				return "deploy of " + in.Name + " declined", nil
			}
			return in.Name + " deployed", func(d *Desk) { d.Deployed = append(d.Deployed, in.Name) }
		})...)
}

func refundTool() node.Tool[Desk] {
	return node.NewTool("refund", "Refund an order, once a manager approves.",
		func(ctx *node.ToolContext[Desk], in Order) (string, error) {
			return "", ctx.Suspend("refund of order " + in.ID + " needs a manager")
		},
		decided(func(in Order, a Approval) (string, func(*Desk)) {
			if !a.Approved {
				return "refund of order " + in.ID + " declined by " + a.Manager, nil
			}
			return "order " + in.ID + " refunded, approved by " + a.Manager, func(d *Desk) { d.Refunded = append(d.Refunded, in.ID) }
		})...)
}

func askTool() node.Tool[Desk] {
	return node.NewTool("ask", "Ask a human a question.",
		func(ctx *node.ToolContext[Desk], in Question) (string, error) {
			return "", ctx.Suspend("a human must answer: " + in.Text)
		},
		decided(func(in Question, a Answer) (string, func(*Desk)) {
			return "the answer to " + strconv.Quote(in.Text) + " is " + strconv.Quote(a.Text), nil
		})...)
}

func waitTool() node.Tool[Desk] {
	return node.NewTool("wait", "Wait until an event happens.",
		func(ctx *node.ToolContext[Desk], in Wait) (string, error) {
			return "", ctx.Suspend("waiting for "+in.Event, waitOptions(in.Event)...)
		},
		node.OnResume(func(_ *node.ToolContext[Desk], in Wait, r node.Resumed[json.RawMessage]) (string, error) {
			return in.Event + " happened: " + string(r.Payload), nil
		}))
}

func workTool() node.Tool[Desk] {
	return node.NewTool("work", "Do one round of work.",
		func(_ *node.ToolContext[Desk], in Work) (string, error) {
			return fmt.Sprintf("round %d of %d done", in.N, in.Of), nil
		})
}

// ScriptedModel is the desk's deterministic model (see the package doc).
// It keeps none of the requests it answers, so a long session on it does
// not grow.
func ScriptedModel() *scripted.Model {
	return scripted.Func(reply).Configure(scripted.Config{ChunkSize: 6, KeepRequests: -1})
}

func reply(req *llm.Request) (scripted.Reply, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == message.Tool {
		r := afterTool(last.Parts[len(last.Parts)-1])
		if freshTurn(req) && len(r.Calls) == 0 {
			r.Text = "Fresh turn. " + r.Text
		}
		return r, nil
	}
	text := strings.TrimSpace(last.Text())
	verb, arg, _ := strings.Cut(text, " ")
	switch strings.ToLower(verb) {
	case "deploy":
		return scripted.Tool("deploy", Service{Name: arg}), nil
	case "refund":
		return scripted.Tool("refund", Order{ID: arg}), nil
	case "ask":
		return scripted.Tool("ask", Question{Text: arg}), nil
	case "wait":
		return scripted.Tool("wait", Wait{Event: arg}), nil
	case "work":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 {
			n = 1
		}
		r := scripted.Tool("work", Work{N: 1, Of: n})
		r.Text, r.Latency = "working", WorkLatency
		return r, nil
	}
	if freshTurn(req) {
		return scripted.Text("Fresh turn. You said: " + text), nil
	}
	return scripted.Text("You said: " + text + ". That is all I have to say about it."), nil
}

// afterTool is the reply to a tool result: the next round of work, or a
// report of the result.
func afterTool(result message.Part) scripted.Reply {
	var n, of int
	if _, err := fmt.Sscanf(result.Text, "round %d of %d done", &n, &of); err == nil && n < of {
		r := scripted.Tool("work", Work{N: n + 1, Of: of})
		r.Text, r.Latency = "working", WorkLatency
		return r
	}
	if result.IsError {
		return scripted.Text("That failed: " + result.Text)
	}
	return scripted.Text("Done: " + result.Text)
}
