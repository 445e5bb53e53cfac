package resumehttp_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/resumehttp"
)

func TestSign(t *testing.T) {
	at := time.Unix(1767225600, 999)
	body := []byte(`{"payload":"approved"}`)
	ts, sig := resumehttp.Sign(secret, "POST", "/suspensions/s1/resume", body, at)
	require.Equal(t, "1767225600", ts)

	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("1767225600\nPOST\n/suspensions/s1/resume\n" + string(body)))
	require.Equal(t, "sha256="+hex.EncodeToString(mac.Sum(nil)), sig)

	// Every part of the message counts.
	for _, other := range []string{
		sigOf(resumehttp.Sign(secret, "POST", "/suspensions/s1/resume", body, at.Add(time.Second))),
		sigOf(resumehttp.Sign(secret, "PUT", "/suspensions/s1/resume", body, at)),
		sigOf(resumehttp.Sign(secret, "POST", "/suspensions/s2/resume", body, at)),
		sigOf(resumehttp.Sign(secret, "POST", "/suspensions/s1/resume", append(body, ' '), at)),
		sigOf(resumehttp.Sign([]byte("another secret, just as long"), "POST", "/suspensions/s1/resume", body, at)),
	} {
		require.NotEqual(t, sig, other)
	}
}

func sigOf(_, sig string) string { return sig }

func TestSignRequest(t *testing.T) {
	at := time.Unix(1767225600, 0)
	req, err := http.NewRequest("GET", "http://example.com/suspensions?status=pending&machine=m%2F1", nil)
	require.NoError(t, err)
	resumehttp.SignRequest(secret, req, nil, at)
	ts, sig := resumehttp.Sign(secret, "GET", "/suspensions?status=pending&machine=m%2F1", nil, at)
	require.Equal(t, ts, req.Header.Get(resumehttp.HeaderTimestamp))
	require.Equal(t, sig, req.Header.Get(resumehttp.HeaderSignature))

	// An escaped path is signed as sent.
	req, err = http.NewRequest("GET", "http://example.com/suspensions/a%2Fb", nil)
	require.NoError(t, err)
	resumehttp.SignRequest(secret, req, nil, at)
	_, sig = resumehttp.Sign(secret, "GET", "/suspensions/a%2Fb", nil, at)
	require.Equal(t, sig, req.Header.Get(resumehttp.HeaderSignature))
}

// A signed query and an escaped path pass the server's check.
func TestSignedQueryAndEscapedPath(t *testing.T) {
	e := memEnv(t)
	mid, sid := e.start(t, "q")
	list := requireOK[resumehttp.SuspensionList](t, e.call(t, "GET", "/suspensions?status=pending&machine="+mid+"&limit=5", ""))
	require.Len(t, list.Suspensions, 1)
	require.Equal(t, sid, list.Suspensions[0].ID)
	requireError(t, e.call(t, "GET", "/suspensions/a%2Fb", ""), http.StatusNotFound, "unknown_suspension")
}
