package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
)

// governedCharter is the refund charter whose approvals policy decides.
func governedCharter(t *testing.T, policy instance.Policy) *machine.Charter {
	t.Helper()
	approve := node.NewTool("approve_refund", "ask a manager to approve a refund",
		func(ctx *node.ToolContext[desk], in refundIn) (string, error) {
			return "", ctx.Suspend(fmt.Sprintf("refund %d for order %d", in.Amount, in.Order), instance.WithPolicy(policy))
		}, node.ResumeWith[verdict]())
	d, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{approve}})
	require.NoError(t, err)
	charter, err := machine.NewCharter(machine.CharterConfig{Model: refundModel(), Nodes: []*node.Node{d}})
	require.NoError(t, err)
	return charter
}

// refundStack serves a console over a desk whose refund approval
// waits under p, with machine m1 parked on it, and returns the stack, its
// runner and the suspension's ID.
func refundStack(t *testing.T, p instance.Policy) (*stack, *durable.Runner, string) {
	t.Helper()
	charter := governedCharter(t, p)
	r := openRunnerOn(t, filepath.Join(t.TempDir(), "console.db"), charter)
	s := newStack(t, console.Config{Runner: r, Charter: charter})
	return s, r, s.park(t, "m1", 7)
}

// TestGovernedDecision: a suspension whose policy names its approver is
// refused to anyone else (403, nothing changes); a decision on another
// digest than the page's is refused as stale (409); the approver's
// decision, naming the digest the page carries, is applied.
func TestGovernedDecision(t *testing.T) {
	s, _, id := refundStack(t, instance.Policy{Subjects: []string{"ada"}})
	page := "/ui/suspensions/" + id

	ada, grace := signedIn(t, s, "ada"), signedIn(t, s, "grace")
	_, body := ada.get(page)
	m := regexp.MustCompile(`name="digest" value="([^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, m, "the decision form carries the digest of what is decided")
	digest := m[1]

	status, _, body := grace.post(page, page+"/resume", url.Values{"_decision": {"true"}, "digest": {digest}})
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, body, "You may not decide this suspension")
	s.requireStatus(t, id, store.StatusPending)

	status, _, body = ada.post(page, page+"/resume", url.Values{"_decision": {"true"}, "digest": {"sha256:other"}})
	require.Equal(t, http.StatusConflict, status)
	require.Contains(t, body, "What is being decided changed since this page was shown")
	s.requireStatus(t, id, store.StatusPending)

	status, loc, _ := ada.post(page, page+"/resume", url.Values{"_decision": {"true"}, "digest": {digest}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/ui/machines/m1?decided="+id, loc)
	s.requireStatus(t, id, store.StatusResolved)
	ada.waitPage("/ui/machines/m1", "Refund approved")
}

// TestGovernedEditForm: where the policy allows edits the decide form has
// an edit field; an edit the tool's input schema refuses is shown again
// naming the field (nothing changes), and an accepted one is applied.
func TestGovernedEditForm(t *testing.T) {
	s, r, id := refundStack(t, instance.Policy{Subjects: []string{"ada"}, AllowEdit: true})
	page := "/ui/suspensions/" + id

	ada := signedIn(t, s, "ada")
	_, body := ada.get(page)
	require.Contains(t, body, `name="_edit"`)
	digest := regexp.MustCompile(`name="digest" value="([^"]+)"`).FindStringSubmatch(body)[1]

	status, _, body := ada.post(page, page+"/resume", url.Values{"_decision": {"true"}, "digest": {digest}, "_edit": {`{"order":7,"amount":"all"}`}})
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, body, "amount")
	s.requireStatus(t, id, store.StatusPending)

	status, _, _ = ada.post(page, page+"/resume", url.Values{"_decision": {"true"}, "digest": {digest}, "_edit": {`{"order":7,"amount":5}`}})
	require.Equal(t, http.StatusSeeOther, status)
	s.requireStatus(t, id, store.StatusResolved)
	m, _, err := r.Load(t.Context(), "m1")
	require.NoError(t, err)
	var edited bool
	for _, msg := range m.History() {
		for _, p := range msg.Parts {
			edited = edited || (p.Kind == message.KindRecord && p.Name == "edited")
		}
	}
	require.True(t, edited, "the history records the edit")

	// The page of the decided suspension shows who edited what.
	_, body = ada.get(page)
	require.Contains(t, body, "Input edited")
	require.Contains(t, body, "by <b>ada</b>")
	require.Regexp(t, `<code>amount</code>: <del>\d+</del> → <ins>5</ins>`, body)
	require.NotContains(t, body, "<code>order</code>", "an unchanged field is not listed")
}

// TestEditShownWhilePending: under a quorum, an approver's edit leaves the
// call waiting for the other's approval of the edited action, and the
// decide page shows the edit beside the progress.
func TestEditShownWhilePending(t *testing.T) {
	s, _, id := refundStack(t, instance.Policy{Subjects: []string{"ada", "bob"}, Quorum: 2, AllowEdit: true})
	page := "/ui/suspensions/" + id
	ada, bob := signedIn(t, s, "ada"), signedIn(t, s, "bob")
	_, body := ada.get(page)
	digest := regexp.MustCompile(`name="digest" value="([^"]+)"`).FindStringSubmatch(body)[1]
	status, _, _ := ada.post(page, page+"/resume", url.Values{"_decision": {"true"}, "digest": {digest}, "_edit": {`{"order":7,"amount":5}`}})
	require.Equal(t, http.StatusSeeOther, status)
	s.requireStatus(t, id, store.StatusPending)

	_, body = bob.get(page)
	require.Contains(t, body, "1 of 2 approvals")
	require.Contains(t, body, "Input edited")
	require.Regexp(t, `by <b>ada</b><br><code>amount</code>: <del>\d+</del> → <ins>5</ins>`, body)
}
