package console_test

import (
	"context"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// narrow is a phone's width, in CSS pixels.
const narrow = 390

// atWidth sets the tab's viewport to width CSS pixels.
func atWidth(width int64) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: width, Height: 844, DeviceScaleFactor: 1})
		return err
	})
}

// requireFits requires the page at path to be no wider than the
// viewport: nothing to scroll sideways.
func requireFits(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(css(`main`))))
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, document.documentElement.clientWidth]`))
	require.NoError(t, err)
	require.LessOrEqual(t, got[0], got[1], "%s is %d px wide in a %d px viewport", url, got[0], got[1])
}

// TestBrowserNarrow: at 390 px, the inbox, a decision, a machine and the
// machines list fit the screen (#29 item 9).
func TestBrowserNarrow(t *testing.T) {
	ctx, _ := browser(t, true)
	s := newStack(t, console.Config{})
	id := s.park(t, "m-2041-a-rather-long-machine-id", 41)
	s.park(t, "m-2042", 42)
	require.NoError(t, chromedp.Do(ctx, atWidth(narrow), signInAs(s, "ada")))
	for _, p := range []string{"/ui/", "/ui/?status=all", "/ui/suspensions/" + id, "/ui/machines/m-2042", "/ui/machines"} {
		requireFits(t, ctx, s.srv.URL+p)
	}
}

// TestBrowserNarrowFleet: at 390 px, the fleet view fits the screen.
func TestBrowserNarrowFleet(t *testing.T) {
	ctx, _ := browser(t, true)
	st, _, _ := pgtest.Open(t)
	f, err := fleet.New(fleet.Config{Store: st, Charter: newCharter(t), Workers: 2})
	require.NoError(t, err)
	s := newStack(t, console.Config{Runner: f.Runner(), Fleet: f})
	_, err = f.Runner().Create(context.Background(), "m-queued-with-a-long-id", "desk", nil)
	require.NoError(t, err)
	_, err = f.Send(context.Background(), "m-queued-with-a-long-id", message.UserText("refund order 7"))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, atWidth(narrow), signInAs(s, "ada")))
	requireFits(t, ctx, s.srv.URL+"/ui/fleet")
}
