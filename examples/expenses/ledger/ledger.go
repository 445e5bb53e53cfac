// Package ledger is the charter of the expenses example: an assistant
// that files an employee's expenses and asks a manager to approve each,
// with a senior node for large amounts.
//
// The ledger is a pack (node.NewPack): its state lives on the machine's
// root, both nodes opt into it, and no transition touches it, so the
// filed expenses survive an escalation to the senior node and the way
// back. Its request_approval tool suspends for a manager's typed
// Approval with a 48-hour deadline that rejects on timeout; its
// resume handler records the outcome, telling a manager's decision from a
// withdrawal (the withdraw command) and an expiry by the resolution's
// cause. The model is scripted (Model), so the example runs offline.
package ledger

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// Node names, and the pack's.
const (
	Assistant = "assistant"
	Senior    = "senior"
	Pack      = "ledger"
)

// Large is the amount from which an expense goes to the senior node.
const Large = 1000

// ApprovalTimeout is how long a manager has to decide.
const ApprovalTimeout = 48 * time.Hour

// The statuses of an expense.
const (
	Filed     = "filed"
	Pending   = "pending"
	Approved  = "approved"
	Rejected  = "rejected"
	Withdrawn = "withdrawn"
	Expired   = "expired"
)

// Expense is one filed expense.
type Expense struct {
	ID     string  `json:"id"`
	Item   string  `json:"item"`
	Amount float64 `json:"amount"`
	Status string  `json:"status"`
	// SuspendID is the approval's suspension, while one is asked for.
	SuspendID string `json:"suspend_id,omitempty"`
	// DecidedBy is the manager who decided, for approved and rejected.
	DecidedBy string `json:"decided_by,omitempty"`
}

// Ledger is the pack's state: every expense of the conversation.
type Ledger struct {
	Expenses []Expense `json:"expenses"`
}

// Find returns the expense id, or nil.
func (l *Ledger) Find(id string) *Expense {
	i := slices.IndexFunc(l.Expenses, func(e Expense) bool { return e.ID == id })
	if i < 0 {
		return nil
	}
	return &l.Expenses[i]
}

// Approval is the manager's decision: the payload the approval's
// suspension accepts, refused before it is consumed when it does not fit.
type Approval struct {
	Approved bool   `json:"approved" jsonschema:"whether the expense is approved"`
	Manager  string `json:"manager" jsonschema:"who decided"`
	Note     string `json:"note,omitempty" jsonschema:"a word for the employee"`
}

// FileInput is file_expense's input.
type FileInput struct {
	Item   string  `json:"item" jsonschema:"what was bought"`
	Amount float64 `json:"amount" jsonschema:"the amount in dollars"`
}

// ApprovalInput is request_approval's input, and withdraw's.
type ApprovalInput struct {
	ExpenseID string `json:"expense_id" jsonschema:"the expense, as file_expense named it"`
}

// NewPack returns the ledger pack: file_expense, request_approval and the
// withdraw command.
func NewPack() *node.Pack {
	file := node.NewPackTool("file_expense", "File an expense.",
		func(ctx *node.PackContext[Ledger], in FileInput) (string, error) {
			var id string
			err := ctx.Update(func(l *Ledger) {
				id = "e" + strconv.Itoa(len(l.Expenses)+1)
				l.Expenses = append(l.Expenses, Expense{ID: id, Item: in.Item, Amount: in.Amount, Status: Filed})
			})
			return fmt.Sprintf("filed %s: %s, $%.2f", id, in.Item, in.Amount), err
		})
	request := node.NewPackTool("request_approval", "Ask a manager to approve a filed expense.",
		func(ctx *node.PackContext[Ledger], in ApprovalInput) (string, error) {
			l := ctx.State()
			e := l.Find(in.ExpenseID)
			if e == nil {
				return "", fmt.Errorf("no expense %q", in.ExpenseID)
			}
			// The ID names the machine's root and the expense: unique
			// across the store, and known to the withdraw command.
			id := "approval-" + ctx.InstanceID() + "-" + e.ID
			if err := ctx.Update(func(l *Ledger) { l.Find(in.ExpenseID).Status, l.Find(in.ExpenseID).SuspendID = Pending, id }); err != nil {
				return "", err
			}
			return "", ctx.Suspend(fmt.Sprintf("approve %s: %s, $%.2f", e.ID, e.Item, e.Amount),
				instance.WithID(id),
				instance.WithMetadata(e),
				instance.WithTimeout(ApprovalTimeout),
				instance.OnTimeoutResume(Approval{Approved: false, Manager: "nobody", Note: "no decision within 48 hours"}, false))
		},
		// expenses:resume:begin
		node.OnPackResume(func(ctx *node.PackContext[Ledger], in ApprovalInput, r node.Resumed[Approval]) (string, error) {
			status := Rejected
			switch {
			case r.Cause == instance.CauseCommand:
				status = Withdrawn
			case r.Cause == instance.CauseTimeout:
				status = Expired
			case r.Payload.Approved:
				status = Approved
			}
			err := ctx.Update(func(l *Ledger) {
				e := l.Find(in.ExpenseID)
				e.Status, e.SuspendID = status, ""
				if status == Approved || status == Rejected {
					e.DecidedBy = r.Payload.Manager
				}
			})
			return fmt.Sprintf("expense %s %s", in.ExpenseID, status), err
		}))
	// expenses:resume:end
	withdraw := node.PackCommand(command.New("withdraw", "Withdraw an expense whose approval is pending.",
		func(ctx *command.Context[Ledger], in ApprovalInput) (string, error) {
			l := ctx.State()
			e := l.Find(in.ExpenseID)
			if e == nil || e.Status != Pending {
				return "", fmt.Errorf("expense %q: no approval is pending", in.ExpenseID)
			}
			if err := ctx.Resume(e.SuspendID, Approval{Manager: "the employee", Note: "withdrawn"}); err != nil {
				return "", err
			}
			return "withdrawn " + e.ID, nil
		}))
	return node.NewPack(Pack, "The employee's expenses.", Ledger{}, file, request, withdraw)
}

// NewCharter builds the charter on model; clock, when set, tells the time
// (tests move it through the deadline).
func NewCharter(model llm.Model, clock func() time.Time) (*machine.Charter, error) {
	// expenses:nodes:begin
	pack := NewPack()
	assistant, err := node.New(Assistant, node.Config[struct{}]{
		Instructions: fmt.Sprintf("File the employee's expenses and ask a manager to approve each. Hand expenses of $%d or more to the senior node.", Large),
		Packs:        []*node.Pack{pack},
		Transitions:  []node.Transition[struct{}]{node.To[struct{}](Senior, "Hand a large expense to the senior node.")},
	})
	if err != nil {
		return nil, err
	}
	senior, err := node.New(Senior, node.Config[struct{}]{
		Instructions: "Ask for approval of the large expense, then hand back to the assistant.",
		Packs:        []*node.Pack{pack},
		Transitions:  []node.Transition[struct{}]{node.To[struct{}](Assistant, "Hand back to the assistant.")},
	})
	// expenses:nodes:end
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{
		Name:  "expenses",
		Model: model,
		Nodes: []*node.Node{assistant, senior},
		Clock: clock,
	})
}

// spent reads "… $40 … on a taxi" from an employee's message.
var spent = regexp.MustCompile(`\$(\d+(?:\.\d+)?)\D.*?\bon (?:a |an |the )?(\w+)`)

// Model is the scripted model of the example, deterministic from the
// transcript alone (so a machine resumed in another process gets the same
// replies): it files what a message says was spent, hands a large expense
// to the senior node, asks for approval, hands back, and reports.
func Model() *scripted.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		id := "t" + strconv.Itoa(len(req.Messages))
		call := func(name string, in any) (scripted.Reply, error) {
			return scripted.Reply{Calls: []scripted.Call{{ID: id, Name: name, Input: in}}}, nil
		}
		last := req.Messages[len(req.Messages)-1]
		canEscalate := slices.ContainsFunc(req.Tools, func(t llm.ToolSpec) bool { return t.Name == node.TransitionPrefix+Senior })
		if last.Role != message.Tool {
			m := spent.FindStringSubmatch(last.Text())
			if m == nil {
				return scripted.Text("Tell me what you spent, and on what."), nil
			}
			amount, _ := strconv.ParseFloat(m[1], 64)
			return call("file_expense", FileInput{Item: m[2], Amount: amount})
		}
		result := last.Parts[0].Text
		switch {
		case strings.HasPrefix(result, "filed "):
			expense := strings.TrimSuffix(strings.Fields(result)[1], ":")
			if amount := lastFiled(req.Messages); amount >= Large && canEscalate {
				return call(node.TransitionPrefix+Senior, struct{}{})
			}
			return call("request_approval", ApprovalInput{ExpenseID: expense})
		case strings.Contains(result, Senior):
			return call("request_approval", ApprovalInput{ExpenseID: lastExpense(req.Messages)})
		case strings.HasPrefix(result, "expense ") && !canEscalate:
			return call(node.TransitionPrefix+Assistant, struct{}{})
		case strings.HasPrefix(result, "expense "):
			return scripted.Text("Done: " + result + "."), nil
		}
		return scripted.Text("Back with you: " + lastDecision(req.Messages) + "."), nil
	})
}

// lastFiled is the amount of the last file_expense call of msgs.
func lastFiled(msgs []message.Message) float64 {
	for _, m := range slices.Backward(msgs) {
		for _, p := range m.Parts {
			if p.Kind == message.KindToolUse && p.Name == "file_expense" {
				in, _ := instance.Decode[FileInput](p.Data)
				return in.Amount
			}
		}
	}
	return 0
}

// lastExpense is the ID of the last expense filed in msgs.
func lastExpense(msgs []message.Message) string {
	for _, m := range slices.Backward(msgs) {
		for _, p := range m.Parts {
			if p.Kind == message.KindToolResult && strings.HasPrefix(p.Text, "filed ") {
				return strings.TrimSuffix(strings.Fields(p.Text)[1], ":")
			}
		}
	}
	return ""
}

// lastDecision is the last "expense … <status>" result of msgs.
func lastDecision(msgs []message.Message) string {
	for _, m := range slices.Backward(msgs) {
		for _, p := range m.Parts {
			if p.Kind == message.KindToolResult && strings.HasPrefix(p.Text, "expense ") {
				return p.Text
			}
		}
	}
	return "nothing decided"
}
