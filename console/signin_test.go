package console_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/resumehttp"
)

// TestWeakSecretRefused: the console's secret is held to the API's
// minimum.
func TestWeakSecretRefused(t *testing.T) {
	for _, weak := range []string{"abc", "0123456789012345678901234567890", string(bytes.Repeat([]byte("x"), 40))} {
		_, err := console.New(console.Config{Runner: openRunner(t, t.TempDir()+"/c.db"), Charter: newCharter(t), Secret: []byte(weak)})
		require.ErrorIs(t, err, console.ErrInvalidConfig)
		require.ErrorIs(t, err, resumehttp.ErrWeakSecret)
	}
}

// TestSignInThrottled: failed sign-ins are logged with the name and the
// address, and after SignInBurst of them an address is refused with 429
// and Retry-After, even with the right secret; the right secret is heard
// again once the limit forgives.
func TestSignInThrottled(t *testing.T) {
	var logs bytes.Buffer
	s := newStack(t, console.Config{SignInBurst: 3, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := newClient(t, s)
	for range 3 {
		status, _, body := c.post("/ui/login", "/ui/login", url.Values{"name": {"mallory"}, "secret": {"guess"}})
		require.Equal(t, http.StatusUnauthorized, status)
		require.Contains(t, body, "Wrong name or secret.")
	}
	require.Len(t, regexp.MustCompile(`failed sign-in" name=mallory client=127.0.0.1`).FindAllString(logs.String(), -1), 3, "%s", logs.String())

	status, _, body := c.post("/ui/login", "/ui/login", url.Values{"name": {"ada"}, "secret": {secret}})
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Contains(t, body, "Too many failed sign-ins")
	require.Contains(t, logs.String(), "sign-in refused")
}

// TestEnterDoesNotDecide: the decision form's default button (the one
// Enter in a field presses) is disabled, so a decision takes a click on
// Approve or Reject; required text inputs are marked required.
func TestEnterDoesNotDecide(t *testing.T) {
	s, id := parked(t, "m1", 5)
	c := signedIn(t, s, "ada")
	status, page := c.get("/ui/suspensions/" + id)
	require.Equal(t, http.StatusOK, status)
	form := regexp.MustCompile(`(?s)<form method="post" action="/ui/suspensions/[^"]+/resume" class="payload">(.*?)</form>`).FindStringSubmatch(page)
	require.NotNil(t, form)
	first := regexp.MustCompile(`<button[^>]*type="submit"[^>]*>`).FindString(form[1])
	require.Contains(t, first, " disabled", "the first submit button is the default; it must be disabled: %s", first)
	require.Contains(t, form[1], `class="approve"`)
}
