package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/internal/testkit"
)

// axeScript returns axe-core's script, installed from the pinned
// lockfile under testdata/axe. Without it the accessibility test skips,
// unless CI is set (testkit.Require; .ci/run installs it).
func axeScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "axe", "node_modules", "axe-core", "axe.min.js"))
	testkit.Require(t, err, "axe-core", "cd console/testdata/axe && npm ci (or .ci/run)")
	return string(b)
}

// axeViolation is what the test keeps of an axe-core violation.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any `json:"target"`
	} `json:"nodes"`
}

// requireAccessible runs axe-core on the page at url and requires no
// serious or critical violation.
func requireAccessible(t *testing.T, ctx context.Context, script, url string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(css(`main`))))
	requireAccessibleHere(t, ctx, script, url)
}

// requireAccessibleHere runs axe-core on the tab's page as it is (what
// names it in a failure) and requires no serious or critical violation.
func requireAccessibleHere(t *testing.T, ctx context.Context, script, url string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Evaluate[any](script+";0"))
	require.NoError(t, err)
	found, err := chromedp.Run(ctx, chromedp.Evaluate[[]axeViolation](
		`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations.filter(v => v.impact === "serious" || v.impact === "critical"))`,
		chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	var lines []string
	for _, v := range found {
		var where []string
		for _, n := range v.Nodes {
			where = append(where, fmt.Sprint(n.Target...))
		}
		lines = append(lines, fmt.Sprintf("%s (%s): %s at %s", v.ID, v.Impact, v.Help, strings.Join(where, ", ")))
	}
	require.Empty(t, lines, "%s", url)
}

// TestBrowserAccessible: axe-core finds no serious or critical violation
// on the console's pages, at 390 px and 1280 px.
func TestBrowserAccessible(t *testing.T) {
	script := axeScript(t)
	_, root := browser(t, true)
	// Eighteen pages checked: more than one tab's minute under -race.
	ctx, cancel := context.WithTimeout(root, 5*time.Minute)
	defer cancel()
	s := newStack(t, console.Config{})
	id := s.park(t, "m1", 41)
	decided := s.park(t, "m2", 42)
	c := signedIn(t, s, "ada")
	page := "/ui/suspensions/" + decided
	c.post(page, page+"/resume", map[string][]string{"_decision": {"true"}})
	pages := []string{"/ui/login", "/ui/", "/ui/?status=all", "/ui/suspensions/" + id, "/ui/suspensions/" + decided, "/ui/machines/m1", "/ui/machines/m2", "/ui/machines", "/ui/fleet"}
	require.NoError(t, chromedp.Do(ctx, signInAs(s, "ada")))
	for _, width := range []int64{narrow, 1280} {
		require.NoError(t, chromedp.Do(ctx, atWidth(width)))
		for _, p := range pages {
			requireAccessible(t, ctx, script, s.srv.URL+p)
		}
		// The decide page showing an error at its field.
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Navigate(s.srv.URL+"/ui/suspensions/"+id),
			chromedp.SendKeys(css(`textarea[name=tags]`), `["ok", 3]`),
			chromedp.Click(css(`button.approve`)),
			chromedp.WaitVisible(css(`#field-tags-err`)),
		))
		requireAccessibleHere(t, ctx, script, "the decide page with an error at a field")
	}
}
