package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/store/sqlite"
)

// get returns the status and body of an unsigned GET of url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestProbes(t *testing.T) {
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "markov.db")})
	require.NoError(t, err)
	srv := httptest.NewServer(withProbes(http.NotFoundHandler(), st))
	defer srv.Close()

	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := get(t, srv.URL+path)
		require.Equal(t, http.StatusOK, code, path)
		require.Equal(t, "ok\n", body, path)
	}
	code, _ := get(t, srv.URL+"/suspensions")
	require.Equal(t, http.StatusNotFound, code, "other paths go to the wrapped handler")

	require.NoError(t, st.Close())
	code, body := get(t, srv.URL+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "not ready: sqlite: ping: ")
	code, _ = get(t, srv.URL+"/healthz")
	require.Equal(t, http.StatusOK, code, "the process is still up")
}
