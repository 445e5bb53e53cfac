package agui_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/agui"
	"github.com/markov-agents/markov/internal/testkit"
)

// modules serves the files of dir, the Node project's node_modules, to
// the page's import map: a module named without its extension (rxjs's
// relative imports) is the file with ".js" added, and every script is
// served as JavaScript.
func modules(dir string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := filepath.Join(dir, filepath.FromSlash(r.URL.Path))
		if st, err := os.Stat(name); err != nil || st.IsDir() {
			name += ".js"
		}
		if ext := filepath.Ext(name); ext == ".js" || ext == ".mjs" {
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		}
		http.ServeFile(w, r, name)
	})
}

// TestBrowserPage: a page in Chromium using the official client
// (@ag-ui/client's HttpAgent, loaded as ES modules, no bundler) shows an
// answer as it streams, a form built from an interrupt's responseSchema,
// and, once the form is submitted, the resumed run's answer.
func TestBrowserPage(t *testing.T) {
	nodeModules := filepath.Join(clientDir, "node_modules")
	_, err := os.Stat(filepath.Join(nodeModules, "@ag-ui", "client", "dist", "index.mjs"))
	testkit.Require(t, err, "the AG-UI TypeScript client", "cd agui/testdata/client && npm ci (or .ci/run)")
	chromium := testkit.Chromium(t)

	f := newFixture(t)
	// No Config.Auth: the page is served from the endpoint's origin, and
	// in production an authentication of the application's own (a
	// session cookie) stands in front of both.
	h, err := agui.New(agui.Config{Runner: f.runner, Node: "desk"})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/agui", h)
	mux.Handle("/node_modules/", http.StripPrefix("/node_modules/", modules(nodeModules)))
	mux.Handle("/", http.FileServer(http.Dir(filepath.Join("testdata", "page"))))
	srv := serve(t, h, mux).URL

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.UserDataDir(t.TempDir()))
	defer cancelAlloc()
	root, cancel := chromedp.NewContext(alloc)
	defer cancel()
	require.NoError(t, chromedp.Do(root)) // starts the browser, without a deadline
	ctx, stop := context.WithTimeout(root, 2*time.Minute)
	defer stop()

	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	textOf := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
		require.NoError(t, err)
		return s
	}
	// await waits for the page's status to be status (or an error).
	await := func(status string) {
		t.Helper()
		err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`["`+status+`", "error"].includes(document.getElementById("status").textContent.split(" ")[0])`, chromedp.WithPollingTimeout(time.Minute)))
		require.NoError(t, err, "waiting for %q", status)
		require.Equal(t, status, textOf(`#status`), "the answer: %q", textOf(`#answer`))
	}
	// send sends text as the user's message.
	send := func(text string) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(css(`#message`), text), chromedp.Click(css(`#send`))))
	}

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv+"/")))
	await("ready") // the page loaded @ag-ui/client

	// A streamed answer: the deltas of TEXT_MESSAGE_CONTENT.
	send("hello")
	await("done")
	require.Equal(t, "You said: hello", textOf(`#answer`))
	deltas, err := chromedp.Run(ctx, chromedp.AttributeValue(css(`#answer`), "data-deltas"))
	require.NoError(t, err)
	require.NotEqual(t, "0", deltas.Value, "the answer came as TEXT_MESSAGE_CONTENT deltas")
	t.Logf("the answer came in %s deltas", deltas.Value)

	// An interrupt: a form from its responseSchema.
	send("refund 42")
	await("waiting")
	require.Equal(t, "refund of order 42 needs a manager", textOf(`form.interrupt .reason`))
	typ, err := chromedp.Run(ctx, chromedp.AttributeValue(css(`form.interrupt input[name=approved]`), "type"))
	require.NoError(t, err)
	require.Equal(t, "checkbox", typ.Value, "a boolean property is a checkbox")
	typ, err = chromedp.Run(ctx, chromedp.AttributeValue(css(`form.interrupt input[name=by]`), "type"))
	require.NoError(t, err)
	require.Equal(t, "text", typ.Value, "a string property is a text input")

	// Approving resumes the run, whose answer the page shows.
	require.NoError(t, chromedp.Do(ctx, chromedp.Steps(
		chromedp.Click(css(`form.interrupt input[name=approved]`)),
		chromedp.SendKeys(css(`form.interrupt input[name=by]`), "ann"),
		chromedp.Click(css(`form.interrupt button[type=submit]`)),
	)))
	await("done")
	require.Equal(t, "Done: order 42: shoes, 40 EUR; order 42 refunded, approved by ann", textOf(`#answer`))
	left, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("form.interrupt").length`))
	require.NoError(t, err)
	require.Zero(t, left, "no interrupt is left")

	st, err := f.runner.Status(t.Context(), "page-thread")
	require.NoError(t, err)
	require.Empty(t, st.Pending, "the suspension was resumed")
}
