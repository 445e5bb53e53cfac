package resumehttp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The headers that authenticate a request.
const (
	// HeaderTimestamp carries the signing time in unix seconds.
	HeaderTimestamp = "X-Markov-Timestamp"
	// HeaderSignature carries "sha256=" followed by the hex HMAC-SHA256 of
	// the signed message (see the package documentation).
	HeaderSignature = "X-Markov-Signature"
)

// signaturePrefix opens the signature header's value.
const signaturePrefix = "sha256="

// Sign returns the header values that authenticate a request with method,
// path and body sent at t: the timestamp (unix seconds) and the signature
// ("sha256=" + hex HMAC-SHA256 under secret). path is the escaped URL path
// as sent, followed by "?" and the raw query when there is one.
func Sign(secret []byte, method, path string, body []byte, t time.Time) (timestamp, signature string) {
	timestamp = strconv.FormatInt(t.Unix(), 10)
	return timestamp, signaturePrefix + hex.EncodeToString(mac(secret, timestamp, method, path, body))
}

// SignRequest sets the HeaderTimestamp and HeaderSignature headers of req
// for body, signed at t. body must be exactly what req sends; req.Body is
// not read or changed.
func SignRequest(secret []byte, req *http.Request, body []byte, t time.Time) {
	ts, sig := Sign(secret, req.Method, signedPath(req.URL), body, t)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, sig)
}

// mac computes the HMAC-SHA256 of the signed message.
func mac(secret []byte, timestamp, method, path string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(timestamp))
	h.Write([]byte{'\n'})
	h.Write([]byte(method))
	h.Write([]byte{'\n'})
	h.Write([]byte(path))
	h.Write([]byte{'\n'})
	h.Write(body)
	return h.Sum(nil)
}

// signedPath is the path part of the signed message for u.
func signedPath(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if q := withoutQueryAuth(u.RawQuery); q != "" {
		p += "?" + q
	}
	return p
}

// withoutQueryAuth is the raw query without the QueryTimestamp and
// QuerySignature parameters (SignURL), the others in their order.
func withoutQueryAuth(raw string) string {
	if !strings.Contains(raw, QueryTimestamp+"=") && !strings.Contains(raw, QuerySignature+"=") {
		return raw
	}
	var kept []string
	for part := range strings.SplitSeq(raw, "&") {
		if !strings.HasPrefix(part, QueryTimestamp+"=") && !strings.HasPrefix(part, QuerySignature+"=") {
			kept = append(kept, part)
		}
	}
	return strings.Join(kept, "&")
}

// replayKey is the replay guard's key for a request signature.
func replayKey(sig []byte) string { return "resumehttp:" + hex.EncodeToString(sig) }

// checkHeaders validates the headers of r against now and window: both
// present and well formed, the timestamp within ±window. It returns the
// timestamp and the decoded signature.
func checkHeaders(r *http.Request, now time.Time, window time.Duration) (string, []byte, *authError) {
	ts, sig := r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature)
	if ts == "" && sig == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		// A browser's EventSource cannot set headers: a GET may carry
		// them in its query (SignURL).
		q := r.URL.Query()
		if qts, qsig := q.Get(QueryTimestamp), q.Get(QuerySignature); qts != "" && qsig != "" {
			ts, sig = qts, signaturePrefix+qsig
		}
	}
	if ts == "" || sig == "" {
		return "", nil, &authError{"missing_signature", "missing " + HeaderTimestamp + " or " + HeaderSignature + " header"}
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", nil, &authError{"malformed_signature", HeaderTimestamp + " is not unix seconds"}
	}
	hexSig, ok := strings.CutPrefix(sig, signaturePrefix)
	if !ok {
		return "", nil, &authError{"malformed_signature", HeaderSignature + ` does not start with "` + signaturePrefix + `"`}
	}
	raw, err := hex.DecodeString(hexSig)
	if err != nil || len(raw) != sha256.Size {
		return "", nil, &authError{"malformed_signature", HeaderSignature + " is not a hex SHA-256 MAC"}
	}
	// Compare in seconds, on the bounds: a hostile timestamp near the int64
	// limits must not overflow into the window.
	n, limit := now.Unix(), int64(window/time.Second)
	if secs < n-limit || secs > n+limit {
		return "", nil, &authError{"stale_timestamp", HeaderTimestamp + " is outside the accepted window"}
	}
	return ts, raw, nil
}

// verify reports whether sig is the MAC of the request's message.
func verify(secret []byte, r *http.Request, ts string, sig, body []byte) bool {
	return hmac.Equal(sig, mac(secret, ts, r.Method, signedPath(r.URL), body))
}
