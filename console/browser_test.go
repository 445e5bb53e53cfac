package console_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// updateScreenshots rewrites docs/console-*.png from the browser tests.
var updateScreenshots = flag.Bool("update-screenshots", false, "write the console screenshots under docs/")

// browser starts a headless chromium with a fresh profile, scripts on or
// off, and returns the context of its first tab, bounded to a minute;
// the browser ends with the test. The second context is the unbounded
// one, for otherBrowser.
func browser(t *testing.T, js bool) (context.Context, context.Context) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(testkit.Chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		// No network: only the test's own servers (the OpenID provider's
		// pages ask for web fonts).
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return tab(t, ctx, js), ctx
}

// tab starts the tab of ctx (its first action must have no deadline),
// sets scripts on or off and returns it bounded to a minute.
func tab(t *testing.T, ctx context.Context, js bool) context.Context {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: !js})
		return err
	})))
	bounded, cancel := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(cancel)
	return bounded
}

// otherBrowser is a second browser context (its own cookies) of the
// browser of root.
func otherBrowser(t *testing.T, root context.Context) context.Context {
	t.Helper()
	c, cancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	return tab(t, c, true)
}

func css(s string) chromedp.CSS { return chromedp.CSS(s) }

func signInAs(s *stack, name string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(s.srv.URL+"/ui/login"),
		chromedp.SendKeys(css(`input[name=name]`), name),
		chromedp.SendKeys(css(`input[name=secret]`), secret),
		chromedp.Submit(css(`input[name=secret]`)),
		chromedp.WaitVisible(css(`#who`)),
	)
}

// text waits for sel and returns its text.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(sel))))
	s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
	require.NoError(t, err)
	return s
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if !*updateScreenshots {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("..", "docs", name), png, 0o644))
}

// TestBrowserLiveInbox: a suspension made by another OS process shows in
// the open inbox without a reload.
func TestBrowserLiveInbox(t *testing.T) {
	ctx, _ := browser(t, true)
	s := newStack(t, console.Config{})
	require.NoError(t, chromedp.Do(ctx,
		signInAs(s, "ada"),
		chromedp.WaitVisible(css(`body[data-following="1"]`)),
		markPage,
	))

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MARKOV_CONSOLE_CHILD=m-child", "MARKOV_DB="+s.path)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child: %s", out)

	require.Equal(t, "refund 7700 for order 77", text(t, ctx, `tr[data-suspension] a.decide`))
	requireNotReloaded(t, ctx)
}

// markPage marks the page, so that requireNotReloaded can tell it was
// updated in place.
var markPage = chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
	_, err := chromedp.Evaluate[any](`window.notReloaded = "yes"`)(ctx, tg)
	return err
})

// requireNotReloaded checks that the page markPage marked is still there.
func requireNotReloaded(t *testing.T, ctx context.Context) {
	t.Helper()
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.notReloaded`))
	require.NoError(t, err)
	require.Equal(t, "yes", marker, "the page was reloaded")
}

// TestBrowserMachineLive: a machine page follows the machine's events. A
// resume made by another runner on the same database shows on the page
// without a reload: the events on its timeline (the resume, the model's
// text, the step), then the final answer.
func TestBrowserMachineLive(t *testing.T) {
	ctx, _ := browser(t, true)
	s, id := parked(t, "m-live", 5)
	require.NoError(t, chromedp.Do(ctx,
		signInAs(s, "ada"),
		chromedp.Navigate(s.srv.URL+"/ui/machines/m-live"),
		chromedp.WaitVisible(css(`body[data-following="1"]`)),
		chromedp.WaitVisible(css(`#timeline li.ev.suspended`)), // the log so far
		markPage,
	))

	other := openRunner(t, s.path)
	run, err := other.Resume(context.Background(), machine.ResumeInput{SuspendID: id, Payload: map[string]any{"approved": true, "note": "live"}})
	require.NoError(t, err)
	_, err = testkit.Collect(run.Steps())
	require.NoError(t, err)

	require.Contains(t, text(t, ctx, `#timeline li.ev.resumed`), id)
	require.Contains(t, text(t, ctx, `#timeline li.ev.text_delta`), "Refund approved")
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`#timeline li.ev.step`))))
	require.Contains(t, text(t, ctx, `#answer`), "Refund approved")
	requireNotReloaded(t, ctx)
}

// TestBrowserApprove approves through the generated form: the machine
// resumes, the page shows the final answer, the graph is drawn.
func TestBrowserApprove(t *testing.T) {
	ctx, _ := browser(t, true)
	s := newStack(t, console.Config{})
	for i, id := range []string{"m-2041", "m-2042"} {
		s.park(t, id, 41+i)
	}
	id := s.park(t, "m-2043", 43)
	require.NoError(t, chromedp.Do(ctx, signInAs(s, "ada"), chromedp.WaitVisible(css(`tr[data-suspension]`))))

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(s.srv.URL+"/ui/suspensions/"+id),
		chromedp.SendKeys(css(`input[name=note]`), "goodwill"),
		chromedp.Click(css(`button.approve`)),
	))
	answer := text(t, ctx, `#answer`)
	require.Contains(t, answer, "Refund approved")
	require.Contains(t, answer, "goodwill")
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`#graph svg`))))
	s.requireStatus(t, id, store.StatusResolved)
	screenshot(t, ctx, "console-machine.png")
}

// TestBrowserViolation: a payload the schema rejects shows the violation
// and leaves the suspension pending.
func TestBrowserViolation(t *testing.T) {
	ctx, _ := browser(t, true)
	s, id := parked(t, "m1", 5)
	require.NoError(t, chromedp.Do(ctx,
		signInAs(s, "ada"),
		chromedp.Navigate(s.srv.URL+"/ui/suspensions/"+id),
		chromedp.SendKeys(css(`textarea[name=tags]`), `["ok", 3]`),
		chromedp.Click(css(`button.approve`)),
	))
	require.Contains(t, text(t, ctx, `.violation`), "tags[1]: expected string, got integer")
	require.Equal(t, "tags: at [1]: expected string, got integer", text(t, ctx, `#field-tags-err`), "the error at its field")
	described, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("field-tags").getAttribute("aria-describedby")`))
	require.NoError(t, err)
	require.Contains(t, strings.Fields(described), "field-tags-err", "the field names its error for screen readers")
	s.requireStatus(t, id, store.StatusPending)
}

// TestBrowserRejectWithoutFilling: in Chromium, Reject goes through with
// the approval's required reason left blank (the browser's checks are
// for Approve), and the machine page says the decision is recorded.
func TestBrowserRejectWithoutFilling(t *testing.T) {
	ctx, _ := browser(t, true)
	s, _ := governedStack(t, nil, nil)
	id := s.park(t, "m1", 7)
	require.NoError(t, chromedp.Do(ctx,
		signInAs(s, "ada"),
		chromedp.Navigate(s.srv.URL+"/ui/suspensions/"+id),
		chromedp.WaitVisible(css(`#field-reason[required]`)),
		chromedp.Click(css(`button.reject`)),
	))
	require.Contains(t, text(t, ctx, `#decided`), "Decision recorded")
	s.requireStatus(t, id, store.StatusResolved)
}

// TestBrowserRace: two people open the same suspension; the second to
// decide is told it was decided elsewhere.
func TestBrowserRace(t *testing.T) {
	first, root := browser(t, true)
	second := otherBrowser(t, root)
	s, id := parked(t, "m1", 9)
	page := s.srv.URL + "/ui/suspensions/" + id
	require.NoError(t, chromedp.Do(first, signInAs(s, "ada"), chromedp.Navigate(page), chromedp.WaitVisible(css(`button.approve`))))
	require.NoError(t, chromedp.Do(second, signInAs(s, "grace"), chromedp.Navigate(page), chromedp.WaitVisible(css(`button.reject`))))
	require.NoError(t, chromedp.Do(first, chromedp.Click(css(`button.approve`)), chromedp.WaitVisible(css(`#answer`))))
	require.NoError(t, chromedp.Do(second, chromedp.Click(css(`button.reject`))))
	conflict := text(t, second, `.conflict`)
	require.Contains(t, conflict, "ada decided this suspension first")
	require.Contains(t, conflict, "resolved")
}

// TestBrowserNoJavaScript lists and decides with scripts disabled.
func TestBrowserNoJavaScript(t *testing.T) {
	ctx, s := signedInWithOne(t, false, 3)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`tr[data-suspension] a.decide`)),
		chromedp.WaitVisible(css(`button.approve`)),
		chromedp.Click(css(`button.reject`)),
	))
	require.Contains(t, text(t, ctx, `#decided`), "Decision recorded")
	// Without scripts the page reloads itself while the run goes on
	// (a noscript refresh, which a browser with scripts merely disabled
	// by DevTools does not honour): reload once the run ended.
	require.Eventually(t, func() bool {
		st, err := s.runner.Status(context.Background(), "m1")
		return err == nil && st.State == durable.StateDone
	}, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, chromedp.Do(ctx, chromedp.Reload()))
	answer := text(t, ctx, `#answer`)
	require.True(t, strings.HasPrefix(answer, "Refund declined"), answer)
	following, err := chromedp.Run(ctx, chromedp.AttributeValue(css(`body`), "data-following"))
	require.NoError(t, err)
	require.False(t, following.Exists, "scripts ran")
}

// TestBrowserLiveKeepsTyping: a live refresh of the inbox adds the new
// row and leaves the filter the person is typing in as it is, with the
// focus (#29 item 5).
func TestBrowserLiveKeepsTyping(t *testing.T) {
	ctx, s := signedInWithOne(t, true, 1)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(css(`body[data-following="1"]`)),
		chromedp.WaitVisible(css(`tr[data-suspension]`)),
		markPage,
		chromedp.SendKeys(css(`input[name=q]`), "refund 2"),
	))
	s.park(t, "m2", 2)
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`tr[data-suspension]:nth-child(2)`))))
	requireNotReloaded(t, ctx)
	typed, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("input[name=q]").value`))
	require.NoError(t, err)
	require.Equal(t, "refund 2", typed)
	focused, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.name`))
	require.NoError(t, err)
	require.Equal(t, "q", focused)
}

// signedInWithOne is a browser (scripts on or off) signed in as ada to a
// stack with machine m1 parked for a refund of order.
func signedInWithOne(t *testing.T, js bool, order int) (context.Context, *stack) {
	t.Helper()
	ctx, _ := browser(t, js)
	s := newStack(t, console.Config{})
	s.park(t, "m1", order)
	require.NoError(t, chromedp.Do(ctx, signInAs(s, "ada")))
	return ctx, s
}

// TestBrowserPeoplePages: the inbox, a decide page under a two-approver
// policy with one approval in, and the machines list fit a phone's
// screen with their fuller content, and are the docs' screenshots at
// 390 px and 1280 px (-update-screenshots).
func TestBrowserPeoplePages(t *testing.T) {
	ctx, _ := browser(t, true)
	s, _ := governedStack(t, &instance.Policy{Subjects: []string{"ada", "bob", "cy"}, Quorum: 2}, nil)
	id := s.park(t, "m-2041-payout", 7)
	s.park(t, "m-2042-payout", 8)
	for _, m := range []string{"m-2043-new"} {
		_, err := s.runner.Create(context.Background(), m, "desk", nil)
		require.NoError(t, err)
	}
	ada := signedIn(t, s, "ada")
	page := "/ui/suspensions/" + id
	_, body := ada.get(page)
	digest := regexp.MustCompile(`name="digest" value="([^"]+)"`).FindStringSubmatch(body)[1]
	status, _, _ := ada.post(page, page+"/resume", map[string][]string{"_decision": {"true"}, "reason": {"the customer was charged twice"}, "digest": {digest}})
	require.Equal(t, http.StatusSeeOther, status)
	require.NoError(t, chromedp.Do(ctx, signInAs(s, "bob")))
	for _, width := range []int64{narrow, 1280} {
		require.NoError(t, chromedp.Do(ctx, atWidth(width)))
		for name, p := range map[string]string{"inbox": "/ui/", "decide": page, "machines": "/ui/machines"} {
			requireFits(t, ctx, s.srv.URL+p)
			screenshot(t, ctx, fmt.Sprintf("console-%s-%d.png", name, width))
		}
	}
}

// TestBrowserReminded: a reminder of a governed call (instance.Policy.Remind)
// shows on the machine page's timeline as it happens, without a reload,
// naming the suspension.
func TestBrowserReminded(t *testing.T) {
	ctx, _ := browser(t, true)
	s, r, id := refundStack(t, instance.Policy{Subjects: []string{"ada"}, Remind: time.Millisecond})
	require.NoError(t, chromedp.Do(ctx,
		signInAs(s, "ada"),
		chromedp.Navigate(s.srv.URL+"/ui/machines/m1"),
		chromedp.WaitVisible(css(`body[data-following="1"]`)),
		chromedp.WaitVisible(css(`#timeline li.ev.suspended`)),
		markPage,
	))
	// The reminder is due a millisecond after the call: sweep until it is.
	require.Eventually(t, func() bool {
		n, err := r.Sweep(context.Background(), 0)
		require.NoError(t, err)
		return n > 0
	}, 10*time.Second, time.Millisecond)
	require.Contains(t, text(t, ctx, `#timeline li.ev.reminded`), id)
	s.requireStatus(t, id, store.StatusPending)
	requireNotReloaded(t, ctx)
}
