package machine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// exampleIDs returns an ID generator for reproducible output: "id1", "id2", …
// Leave CharterConfig.NewID nil in production for random, unguessable IDs.
func exampleIDs() func() string {
	n := 0
	return func() string { n++; return "id" + strconv.Itoa(n) }
}

// examplePart renders one message part on a line.
func examplePart(p message.Part) string {
	switch p.Kind {
	case message.KindText:
		return "text: " + p.Text
	case message.KindToolUse:
		return fmt.Sprintf("tool_use %s %s %s", p.ID, p.Name, p.Data)
	case message.KindToolResult:
		return fmt.Sprintf("tool_result %s: %s", p.ID, p.Text)
	}
	return p.Kind.String()
}

// cityIn is the weather tool's input.
type cityIn struct {
	City string `json:"city" jsonschema:"the city to look up"`
}

// weatherMachine is the examples' machine: an assistant with a weather
// tool that always finds the sun, and a scripted model that looks up Paris
// and then answers.
func weatherMachine() *machine.Machine {
	weather := node.NewTool("weather", "Current weather in a city.",
		func(ctx *node.ToolContext[struct{}], in cityIn) (string, error) {
			return "sunny, 21°C in " + in.City, nil
		})
	assistant, err := node.New("assistant", node.Config[struct{}]{
		Instructions: "Answer questions about the weather.",
		Tools:        []node.Tool[struct{}]{weather},
	})
	if err != nil {
		panic(err)
	}
	// The scripted model streams its replies in chunks of 8 runes.
	model := scripted.New(
		scripted.Tool("weather", cityIn{City: "Paris"}),
		scripted.Text("It is sunny in Paris, 21°C."),
	)
	return exampleMachine(model, assistant)
}

// exampleMachine is a new machine of a charter of model and nodes, with
// the examples' IDs, at nodes[0].
func exampleMachine(model *scripted.Model, nodes ...*node.Node) *machine.Machine {
	charter, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: nodes, NewID: exampleIDs()})
	if err != nil {
		panic(err)
	}
	m, err := charter.NewMachine(nodes[0].Name(), nil)
	if err != nil {
		panic(err)
	}
	return m
}

// printStep prints a step's reason and each part of its messages.
func printStep(step machine.Step) {
	fmt.Printf("step %s (done: %v)\n", step.Reason, step.Done)
	for _, msg := range step.Messages {
		for _, p := range msg.Parts {
			fmt.Printf("  %s: %s\n", msg.Role, examplePart(p))
		}
	}
}

func ExampleMachine_Run() {
	m := weatherMachine()
	for step, err := range m.Run(context.Background(), machine.UserText("Weather in Paris?")) {
		if err != nil {
			panic(err)
		}
		printStep(step)
	}
	// Output:
	// step tool_use (done: false)
	//   assistant: tool_use toolu_1 weather {"city":"Paris"}
	//   tool: tool_result toolu_1: sunny, 21°C in Paris
	// step end_turn (done: true)
	//   assistant: text: It is sunny in Paris, 21°C.
}

func ExampleMachine_Run_suspend() {
	type refundIn struct {
		OrderID string `json:"order_id"`
	}
	refund := node.NewTool("request_refund", "Ask a manager to approve a refund.",
		func(ctx *node.ToolContext[struct{}], in refundIn) (string, error) {
			return "", ctx.Suspend("refund needs manager approval",
				instance.WithMetadata(in), instance.WithTimeout(24*time.Hour))
		})
	support, err := node.New("support", node.Config[struct{}]{
		Tools: []node.Tool[struct{}]{refund},
	})
	if err != nil {
		panic(err)
	}
	m := exampleMachine(scripted.New(
		scripted.Tool("request_refund", refundIn{OrderID: "A-42"}),
		scripted.Text("Your refund for A-42 was approved."),
	), support)
	ctx := context.Background()

	// The run stops at the suspension. A real program would now persist the
	// machine (serialize.Marshal) and hand the suspend ID to whoever
	// decides.
	var pending []instance.SuspendedCall
	for step, err := range m.Run(ctx, machine.UserText("Refund order A-42, please.")) {
		if err != nil {
			panic(err)
		}
		fmt.Printf("step %s (done: %v)\n", step.Reason, step.Done)
		pending = step.Suspensions
	}
	for _, c := range pending {
		fmt.Printf("pending %s: %s %s (%s)\n", c.SuspendID, c.Name, c.Input, c.Reason)
	}

	// Later, maybe in another process: resume with the decision. A string
	// payload is the tool result as is.
	for step, err := range m.Run(ctx, machine.ResumeInput{SuspendID: pending[0].SuspendID, Payload: "approved by Dana"}) {
		if err != nil {
			panic(err)
		}
		printStep(step)
	}
	fmt.Println("pending after resume:", len(m.Pending()))
	// Output:
	// step suspend (done: true)
	// pending id2: request_refund {"order_id":"A-42"} (refund needs manager approval)
	// step end_turn (done: true)
	//   assistant: tool_use toolu_1 request_refund {"order_id":"A-42"}
	//   tool: tool_result toolu_1: approved by Dana
	//   assistant: text: Your refund for A-42 was approved.
	// pending after resume: 0
}

func ExampleCharter_Graph() {
	triage, err := node.New("triage", node.Config[struct{}]{
		Transitions: []node.Transition[struct{}]{
			node.To[struct{}]("billing", "The question is about an invoice or a payment."),
		},
	})
	if err != nil {
		panic(err)
	}
	billing, err := node.New("billing", node.Config[struct{}]{
		Transitions: []node.Transition[struct{}]{
			node.To[struct{}]("triage", "The billing question is settled."),
		},
	})
	if err != nil {
		panic(err)
	}
	charter, err := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(),
		Nodes: []*node.Node{triage, billing},
	})
	if err != nil {
		panic(err)
	}
	graph, err := charter.Graph(machine.GraphMermaid)
	if err != nil {
		panic(err)
	}
	fmt.Print(graph)
	// Output:
	// stateDiagram-v2
	//     triage
	//     billing
	//     [*] --> triage
	//     triage --> billing: transition_to_billing
	//     billing --> triage: transition_to_triage
}

func ExampleMachine_Events() {
	m := weatherMachine()
	for e, err := range m.Events(context.Background(), machine.UserText("Weather in Paris?")) {
		if err != nil {
			panic(err)
		}
		switch e.Kind {
		case machine.EventTextDelta:
			fmt.Printf("%s|", e.Text) // as it arrives
		case machine.EventToolStarted:
			fmt.Printf("[%s %s]\n", e.Tool.Name, e.Tool.Input)
		case machine.EventToolFinished:
			fmt.Printf("[%s: %s]\n", e.Tool.Name, e.Tool.Result)
		case machine.EventStep:
			fmt.Printf("\nstep %s (done: %v)\n", e.Step.Reason, e.Step.Done)
		}
	}
	// Output:
	// [weather {"city":"Paris"}]
	// [weather: sunny, 21°C in Paris]
	//
	// step tool_use (done: false)
	// It is su|nny in P|aris, 21|°C.|
	// step end_turn (done: true)
}

// DefaultDigest is what a fresh-turn resume puts in place of an
// instance's earlier transcript, unless the charter sets its own Digest.
func ExampleDefaultDigest() {
	fmt.Println(machine.DefaultDigest(machine.DigestInput{
		Transcript: []message.Message{
			message.UserText("deploy the release"),
			{Role: message.Assistant, Parts: []message.Part{message.Text("Running the checks first."), message.ToolUse("t1", "run_ci", nil)}},
			{Role: message.Tool, Parts: []message.Part{message.ToolResult("t1", "green", false)}},
			{Role: message.Assistant, Parts: []message.Part{message.ToolUse("t2", "deploy", nil)}},
		},
		Call: instance.SuspendedCall{Reason: "a manager's approval"},
	}))
	// Output:
	// Digest of the conversation so far (4 earlier messages are not shown):
	// - The request: deploy the release
	// - Tools called: run_ci ×1, deploy ×1
	// - Your last reply: Running the checks first.
	// - Then the work paused, waiting for: a manager's approval
	// It resumes now in a fresh turn.
}

// ExampleRestore rebuilds a machine from a tree and a history kept
// elsewhere (serialize and durable do this for you) and runs on from
// them. message.NewHistory reads the messages once; a history the
// machine appended to, or serialize decoded, is handed over as it is.
func ExampleRestore() {
	first := weatherMachine()
	for _, err := range first.Run(context.Background(), machine.UserText("Weather in Paris?")) {
		if err != nil {
			panic(err)
		}
	}
	history := message.NewHistory(first.History())
	m, err := machine.Restore(first.Charter(), first.Root(), history)
	if err != nil {
		panic(err)
	}
	// The assistant's tool exchange is scoped to it: it sees the whole
	// history, another instance only the first message.
	leaf := m.Root().ID
	fmt.Println(len(m.History()), "messages restored;", history.SeenBy(leaf), "seen whole by", leaf+",", history.SeenBy("other"), "by another instance")
	// Output: 4 messages restored; 4 seen whole by id1, 1 by another instance
}

// A charter with a window sends each step the last messages of its
// transcript only: here 3, however long the conversation grows. History
// keeps every message (and package durable, running such a charter,
// loads only the end of a long history).
func ExampleCharterConfig_window() {
	chat, err := node.New("chat", node.Config[struct{}]{})
	if err != nil {
		panic(err)
	}
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		fmt.Printf("the model sees %d messages, from %q\n", len(req.Messages), req.Messages[0].Text())
		return scripted.Text("ok"), nil
	})
	c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{chat}, Window: 3})
	if err != nil {
		panic(err)
	}
	m, err := c.NewMachine("chat", nil)
	if err != nil {
		panic(err)
	}
	for _, q := range []string{"one", "two", "three"} {
		for _, err := range m.Run(context.Background(), machine.UserText(q)) {
			if err != nil {
				panic(err)
			}
		}
	}
	fmt.Println("history holds", len(m.History()), "messages")
	// Output:
	// the model sees 1 messages, from "one"
	// the model sees 3 messages, from "one"
	// the model sees 3 messages, from "two"
	// history holds 6 messages
}

// An acceptor that queues a resume for a later run checks its payload
// first, against the typed call's schema, and refuses a bad one then.
func ExampleMachine_CheckPayload() {
	type approval struct {
		Approved bool `json:"approved"`
	}
	type refundIn struct {
		OrderID string `json:"order_id"`
	}
	refund := node.NewTool("request_refund", "Ask a manager to approve a refund.",
		func(ctx *node.ToolContext[struct{}], in refundIn) (string, error) {
			return "", ctx.Suspend("refund needs manager approval")
		}, node.ResumeWith[approval]())
	support, err := node.New("support", node.Config[struct{}]{Tools: []node.Tool[struct{}]{refund}})
	if err != nil {
		panic(err)
	}
	m := exampleMachine(scripted.New(scripted.Tool("request_refund", refundIn{OrderID: "A-42"})), support)
	var id string
	for step, err := range m.Run(context.Background(), machine.UserText("Refund order A-42, please.")) {
		if err != nil {
			panic(err)
		}
		if len(step.Suspensions) > 0 {
			id = step.Suspensions[0].SuspendID
		}
	}

	err = m.CheckPayload(machine.ResumeInput{SuspendID: id, Payload: "yes"})
	fmt.Println(`"yes" refused:`, errors.Is(err, instance.ErrPayloadDecode))
	err = m.CheckPayload(machine.ResumeInput{SuspendID: id, Payload: approval{Approved: true}})
	fmt.Println("approval accepted:", err == nil)
	fmt.Println("still pending:", len(m.Pending()))
	// Output:
	// "yes" refused: true
	// approval accepted: true
	// still pending: 1
}

// A node offers the ready ask-user tool; the charter's OnSuspend hook
// files a ticket for every question (its number goes into the
// suspension's metadata) and OnResolved hears who answered.
func ExampleHooks() {
	// hooks:example:begin
	desk, _ := node.New("desk", node.Config[struct{}]{
		Tools: []node.Tool[struct{}]{node.AskUser[struct{}](node.AskUserConfig{Timeout: 48 * time.Hour})},
	})
	tickets := 0
	charter, _ := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(
			scripted.Tool(node.AskUserTool, node.AskInput{Question: "Which size?", Kind: node.AskChoice, Options: []string{"S", "M", "L"}}),
			scripted.Text("One shirt in M, coming up."),
		),
		Nodes: []*node.Node{desk},
		Hooks: machine.Hooks{
			OnSuspend: func(_ context.Context, node string, call *instance.SuspendedCall) error {
				tickets++
				call.Metadata, _ = json.Marshal(map[string]any{"ticket": tickets, "asked": call.Reason})
				return nil
			},
			OnResolved: func(_ context.Context, e instance.Event) {
				fmt.Printf("%s %s by %s\n", e.Name, e.Type, e.By)
			},
		},
	})
	// hooks:example:end
	m, _ := charter.NewMachine("desk", nil)
	for range m.Run(context.Background(), machine.UserText("I want a shirt")) {
	}
	call := m.Pending()[0]
	fmt.Printf("waiting: %s %s\nschema: %s\n", call.Reason, call.Metadata, call.PayloadSchema)

	_, err := collectErr(m.Run(context.Background(), machine.ResumeInput{SuspendID: call.SuspendID, Payload: "XL"}))
	fmt.Println("XL refused:", errors.Is(err, instance.ErrPayloadDecode))

	for step := range m.Run(context.Background(), machine.ResumeInput{SuspendID: call.SuspendID, Payload: "M", By: "ann"}) {
		if step.Done {
			fmt.Println(step.Messages[len(step.Messages)-1].Text())
		}
	}
	// Output:
	// waiting: Which size? {"asked":"Which size?","ticket":1}
	// schema: {"type":"string","enum":["S","M","L"]}
	// XL refused: true
	// ask_user resumed by ann
	// One shirt in M, coming up.
}

// collectErr drains a run and returns its error.
func collectErr(seq func(func(machine.Step, error) bool)) (int, error) {
	n := 0
	for _, err := range seq {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
