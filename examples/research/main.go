// Command research is an offline demo of worker nodes: a lead agent spawns
// two researchers, which run concurrently round by round, each calling a
// search tool and ceding its findings; the lead then summarizes.
//
//	go run ./examples/research
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/steptext"
)

// Node names.
const (
	leadNode       = "lead"
	researcherNode = "researcher"
)

// Assignment is a researcher's state: the topic it covers.
type Assignment struct {
	Topic string `json:"topic"`
}

// DispatchArgs are the arguments of the lead's dispatch transition.
type DispatchArgs struct {
	Topics []string `json:"topics" jsonschema:"one researcher is spawned per topic"`
}

// SearchInput is the input of the researchers' search tool.
type SearchInput struct {
	Angle string `json:"angle" jsonschema:"what to look for about your topic, e.g. cost or upkeep"`
}

// question is what the user asks in the demo.
const question = "Should our 40-hectare farm invest in solar panels or a wind turbine?"

// sources stands in for a search engine.
var sources = map[string]string{
	"solar": "solar: a 30 kW array costs about $45k, pays back in 7-9 years and needs little upkeep",
	"wind":  "wind: a 20 kW turbine costs about $80k, pays back in 10-15 years on a good site and needs yearly maintenance",
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "research:", err)
		os.Exit(1)
	}
}

// run asks the question and prints every round.
func run(ctx context.Context, w io.Writer) error {
	return demo(ctx, w, scriptedModel())
}

// demo runs the research flow on model and prints every round.
func demo(ctx context.Context, w io.Writer, model llm.Model) error {
	charter, err := newCharter(model, sequence())
	if err != nil {
		return err
	}
	m, err := charter.NewMachine(leadNode, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "user: %s\n", question)
	p := &printer{w: w, labels: map[string]string{}}
	for step, err := range m.Run(ctx, machine.UserText(question)) {
		if err != nil {
			return err
		}
		if err := p.step(step); err != nil {
			return err
		}
	}
	return nil
}

// newCharter returns the research charter: a lead node that dispatches
// researcher workers and summarizes what they cede; newID makes its
// instance and suspend IDs (nil: random).
func newCharter(model llm.Model, newID func() string) (*machine.Charter, error) {
	// research:spawn:begin
	dispatch := node.NewTransition("dispatch", "Spawn one researcher per topic. They report back when done.",
		func(ctx *node.TransitionContext[struct{}], args DispatchArgs) (instance.Effect, error) {
			if len(args.Topics) == 0 {
				return instance.Effect{}, errors.New("name at least one topic")
			}
			children := make([]instance.Child, len(args.Topics))
			for i, t := range args.Topics {
				if t == "" {
					return instance.Effect{}, errors.New("topics must not be empty")
				}
				children[i] = instance.Child{Node: researcherNode, State: Assignment{Topic: t}}
			}
			return instance.Spawn(children...), nil
		}, node.Targets(researcherNode))
	// research:spawn:end
	lead, err := node.New(leadNode, node.Config[struct{}]{
		Instructions: "Split the user's question into topics, dispatch a researcher per topic, then summarize their findings.",
		Transitions:  []node.Transition[struct{}]{dispatch},
	})
	if err != nil {
		return nil, err
	}

	search := node.NewTool("search", "Search the web about your topic.",
		func(ctx *node.ToolContext[Assignment], in SearchInput) (string, error) {
			found, ok := sources[ctx.State().Topic]
			if !ok {
				return "", fmt.Errorf("nothing found about %q", ctx.State().Topic)
			}
			return found, nil
		}, node.Concurrent())
	// research:worker:begin
	researcher, err := node.New(researcherNode, node.Config[Assignment]{
		Instructions: "Research your topic with search, then cede a one-line finding to the lead.",
		Tools:        []node.Tool[Assignment]{search},
		Transitions:  []node.Transition[Assignment]{node.Ceder[Assignment]("Hand your finding to the lead and finish.")},
		Worker:       true,
	})
	// research:worker:end
	if err != nil {
		return nil, err
	}

	return machine.NewCharter(machine.CharterConfig{
		Name:  "research",
		Model: model,
		Nodes: []*node.Node{lead, researcher},
		// Short, readable IDs for the demo, counted in this process. Leave
		// NewID nil in production: the default IDs are random and
		// unguessable, and unique across processes, where a machine
		// resumed by another process would count again from r1 and
		// refuse the next spawn (ID already in use; the crash kit found
		// it).
		NewID: newID,
	})
}

// sequence returns "r1", "r2", …
func sequence() func() string {
	var n int
	return func() string { n++; return "r" + strconv.Itoa(n) }
}

// scriptedModel plays both agents. The researchers' replies depend only on
// their own transcripts, so the script is deterministic however the
// concurrent leaves are scheduled.
func scriptedModel() *scripted.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		switch req.Node {
		case leadNode:
			var findings []string
			for _, m := range req.Messages {
				if m.Role == message.User && m.Source.Node == researcherNode {
					findings = append(findings, "- "+m.Text())
				}
			}
			if len(findings) == 0 {
				return scripted.Tool("dispatch", DispatchArgs{Topics: []string{"solar", "wind"}}), nil
			}
			return scripted.Text("Findings:\n" + strings.Join(findings, "\n") +
				"\nRecommendation: start with solar; it is cheaper and pays back sooner."), nil
		case researcherNode:
			if last.Role == message.Tool {
				return scripted.Tool("cede", map[string]string{"content": last.Parts[0].Text}), nil
			}
			return scripted.Tool("search", SearchInput{Angle: "cost and payback for a farm"}), nil
		}
		return scripted.Reply{}, fmt.Errorf("no script for node %q", req.Node)
	})
}

// printer prints rounds: the step as package steptext writes it (which
// names the instance of every line when several ran), then the tree with
// each researcher's topic. It remembers instance labels, so a researcher
// that ceded (and left the tree) keeps its name.
type printer struct {
	w      io.Writer
	round  int
	labels map[string]string
}

// step prints one round.
func (p *printer) step(step machine.Step) error {
	p.round++
	for in := range step.Root.Walk() {
		p.labels[in.ID] = in.Node + "[" + in.ID + "]"
		if a, ok := in.State.(Assignment); ok {
			p.labels[in.ID] = fmt.Sprintf("%s(%s)[%s]", in.Node, a.Topic, in.ID)
		}
	}
	fmt.Fprintf(p.w, "\nround %d\n", p.round)
	if err := steptext.Write(steptext.Indent(p.w, "  "), step); err != nil {
		return err
	}
	_, err := fmt.Fprintf(p.w, "  tree: %s\n", p.tree(step.Root))
	return err
}

func (p *printer) tree(in *instance.Instance) string {
	s := p.labels[in.ID]
	if len(in.Children) == 0 {
		return s
	}
	kids := make([]string, len(in.Children))
	for i, c := range in.Children {
		kids[i] = p.tree(c)
	}
	return s + " { " + strings.Join(kids, ", ") + " }"
}
