package resumehttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProtect: an endpoint behind Handler.Protect gets the API's
// authentication — unsigned and badly signed requests are refused with
// the API's JSON errors before it runs — and a signed request reaches
// it with its body to read again.
func TestProtect(t *testing.T) {
	e := memEnv(t)
	var got []string
	srv := httptest.NewServer(e.handler.Protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		got = append(got, r.Method+" "+string(body))
		w.WriteHeader(http.StatusTeapot)
	})))
	t.Cleanup(srv.Close)
	e.srv = srv // e.request and e.signed address it

	requireError(t, do(t, e.request(t, http.MethodPost, "/x", `{"a":1}`)), http.StatusUnauthorized, "missing_signature")
	bad := e.signed(t, http.MethodPost, "/x", `{"a":1}`)
	bad.Header.Set("X-Markov-Signature", "sha256="+strings.Repeat("z", 64))
	requireError(t, do(t, bad), http.StatusUnauthorized, "malformed_signature")
	require.Empty(t, got, "refused requests do not reach the endpoint")

	require.Equal(t, http.StatusTeapot, do(t, e.signed(t, http.MethodPost, "/x", `{"a":1}`)).Status)
	require.Equal(t, http.StatusTeapot, do(t, e.signed(t, http.MethodGet, "/x?threadId=t", "")).Status)
	require.Equal(t, []string{`POST {"a":1}`, "GET "}, got)
}
