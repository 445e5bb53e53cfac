package resumehttp_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
)

// countingListener counts the bytes the server reads from its connections.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &l.read}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// serve serves h through resumehttp.NewServer with cfg on a fresh
// loopback listener and returns the listener.
func serve(t *testing.T, h http.Handler, cfg resumehttp.ServerConfig) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cl := &countingListener{Listener: ln}
	srv := resumehttp.NewServer("", h, cfg)
	go func() { _ = srv.Serve(cl) }()
	t.Cleanup(func() { _ = srv.Close() })
	return cl
}

// dial opens a raw connection to ln with a client-side deadline: the
// tests observe the server through it, never by sleeping.
func dial(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	return conn
}

// readUntilClosed reads conn to its end and fails if the server does not
// close it before the client's deadline.
func readUntilClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	_, err := io.Copy(io.Discard, conn)
	if errors.Is(err, net.ErrClosed) || err != nil && strings.Contains(err.Error(), "connection reset") {
		err = nil
	}
	require.NoError(t, err, "the server kept the connection open")
}

func TestNewServerDefaults(t *testing.T) {
	srv := resumehttp.NewServer(":8080", http.NotFoundHandler(), resumehttp.ServerConfig{})
	require.Equal(t, ":8080", srv.Addr)
	require.Equal(t, resumehttp.DefaultReadHeaderTimeout, srv.ReadHeaderTimeout)
	require.Equal(t, resumehttp.DefaultReadTimeout, srv.ReadTimeout)
	require.Equal(t, resumehttp.DefaultWriteTimeout, srv.WriteTimeout)
	require.Equal(t, resumehttp.DefaultIdleTimeout, srv.IdleTimeout)
	require.Equal(t, resumehttp.DefaultMaxHeaderBytes, srv.MaxHeaderBytes)
	require.NotNil(t, srv.ErrorLog)
	for _, d := range []time.Duration{srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout} {
		require.Positive(t, d)
	}

	cfg := resumehttp.ServerConfig{ReadHeaderTimeout: 1, ReadTimeout: 2, WriteTimeout: 3, IdleTimeout: 4, MaxHeaderBytes: 5}
	srv = resumehttp.NewServer("", http.NotFoundHandler(), cfg)
	require.Equal(t, []any{time.Duration(1), time.Duration(2), time.Duration(3), time.Duration(4), 5},
		[]any{srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes})
}

// An idle keep-alive connection is closed by the server after
// IdleTimeout.
func TestIdleConnectionClosed(t *testing.T) {
	e := memEnv(t)
	ln := serve(t, e.handler, resumehttp.ServerConfig{IdleTimeout: 100 * time.Millisecond})
	conn := dial(t, ln)
	req := e.signed(t, "GET", "/suspensions", "")
	require.NoError(t, req.Write(conn))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, resp.Close, "a keep-alive answer")
	readUntilClosed(t, conn)
}

// A client that stalls its upload is cut off after ReadTimeout.
func TestStalledUploadCut(t *testing.T) {
	e := memEnv(t)
	_, sid := e.start(t, "x")
	ln := serve(t, e.handler, resumehttp.ServerConfig{ReadTimeout: 200 * time.Millisecond})
	conn := dial(t, ln)
	body := `{"payload":"` + strings.Repeat("a", 1000) + `"}`
	req := e.signed(t, "POST", resumePath(sid), body)
	head := "POST " + resumePath(sid) + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n" +
		resumehttp.HeaderTimestamp + ": " + req.Header.Get(resumehttp.HeaderTimestamp) + "\r\n" +
		resumehttp.HeaderSignature + ": " + req.Header.Get(resumehttp.HeaderSignature) + "\r\n\r\n"
	_, err := io.WriteString(conn, head+body[:10])
	require.NoError(t, err)
	readUntilClosed(t, conn)
}

// rawRequest sends req on a fresh connection to ln, its body written by a
// goroutine (the server may stop reading it), and returns the answer and
// how many bytes the server read in all once it closed the connection.
func rawRequest(t *testing.T, ln *countingListener, req *http.Request) (response, int64) {
	t.Helper()
	before := ln.read.Load()
	conn := dial(t, ln)
	go func() { _ = req.Write(conn) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.True(t, resp.Close, "the server closes a connection whose body it did not read")
	readUntilClosed(t, conn)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}, ln.read.Load() - before
}

// bigBody is a request body of n bytes whose length is declared, or not
// (chunked) when declare is false.
func bigBody(req *http.Request, n int64, declare bool) *http.Request {
	req.Body = io.NopCloser(io.LimitReader(zeros{}, n))
	req.ContentLength = n
	if !declare {
		req.ContentLength = -1
	}
	return req
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// A request is authenticated over a bounded body read: one without a
// well-formed signature header is refused before its body is read, and so
// is a body declared over 16 MiB; one over MaxBody is read to its end, up
// to 16 MiB, then refused. The server's reads are counted on its connections. (The refused
// bodies are over the 256 KiB net/http would otherwise drain after the
// handler to reuse the connection.)
func TestBodyReadIsBounded(t *testing.T) {
	e := memEnv(t)
	_, sid := e.start(t, "x")
	ln := serve(t, e.handler, resumehttp.ServerConfig{})
	const (
		slack = 64 << 10 // headers and read buffers
		// postHandlerDrain is what net/http reads of an unfinished body
		// of unknown length after the handler, to reuse the connection.
		postHandlerDrain = 256 << 10
	)
	wrongSecret := func(req *http.Request) *http.Request {
		resumehttp.SignRequest([]byte("another secret, just as long as the real one"), req, nil, e.clock.Now())
		return req
	}
	tests := []struct {
		name    string
		req     *http.Request
		status  int
		code    string
		maxRead int64
	}{
		{"unsigned", bigBody(e.request(t, "POST", resumePath(sid), ""), 512<<10, true),
			http.StatusUnauthorized, "missing_signature", slack},
		{"malformed signature", bigBody(withSig(e.request(t, "POST", resumePath(sid), ""), "sha256=zz"), 512<<10, true),
			http.StatusUnauthorized, "malformed_signature", slack},
		// Over the cap, a body is read to its end (up to 16 MiB) before the
		// 413, so that the client reads the answer (TestTooLargeArrivesAs413).
		{"declared over the cap", bigBody(wrongSecret(e.request(t, "POST", resumePath(sid), "")), 8<<20, true),
			http.StatusRequestEntityTooLarge, "body_too_large", 8<<20 + slack},
		{"declared over the drain limit", bigBody(wrongSecret(e.request(t, "POST", resumePath(sid), "")), 64<<20, true),
			http.StatusRequestEntityTooLarge, "body_too_large", slack},
		{"undeclared over the drain limit", bigBody(wrongSecret(e.request(t, "POST", resumePath(sid), "")), 64<<20, false),
			http.StatusRequestEntityTooLarge, "body_too_large", resumehttp.DefaultMaxBody + 16<<20 + postHandlerDrain + slack},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, read := rawRequest(t, ln, tt.req)
			requireError(t, r, tt.status, tt.code)
			require.LessOrEqual(t, read, tt.maxRead, "bytes the server read")
		})
	}
}

func withSig(req *http.Request, sig string) *http.Request {
	req.Header.Set(resumehttp.HeaderTimestamp, "1")
	req.Header.Set(resumehttp.HeaderSignature, sig)
	return req
}

// After FailureBurst failed authentications an address is refused with
// 429 and Retry-After, even for a good request, until the bucket refills;
// other addresses are served.
func TestFailedSignaturesAreRateLimited(t *testing.T) {
	e := newEnvWith(t, memstore.New(), func(c *resumehttp.Config) {
		c.FailureBurst, c.FailureRefill = 3, time.Minute
	})
	_, sid := e.start(t, "x")
	bad := func() *http.Request {
		req := e.request(t, "GET", "/suspensions/"+sid, "")
		resumehttp.SignRequest([]byte("another secret, just as long as the real one"), req, nil, e.clock.Now())
		return req
	}
	for range 3 {
		requireError(t, do(t, bad()), http.StatusUnauthorized, "bad_signature")
	}
	r := do(t, bad())
	requireError(t, r, http.StatusTooManyRequests, "rate_limited")
	require.Equal(t, "60", r.Header.Get("Retry-After"))
	r = e.call(t, "GET", "/suspensions/"+sid, "")
	requireError(t, r, http.StatusTooManyRequests, "rate_limited")

	// The refusal does not read the body.
	ln := serve(t, e.handler, resumehttp.ServerConfig{})
	r, read := rawRequest(t, ln, bigBody(e.signed(t, "POST", resumePath(sid), ""), 512<<10, true))
	requireError(t, r, http.StatusTooManyRequests, "rate_limited")
	require.Less(t, read, int64(64<<10))

	// Another address is served.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)},
	}).DialContext}}
	resp, err := other.Do(e.signed(t, "GET", "/suspensions/"+sid, ""))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// A minute later one more failure is allowed.
	e.clock.Advance(time.Minute)
	requireOK[resumehttp.Suspension](t, e.call(t, "GET", "/suspensions/"+sid, ""))
	requireError(t, do(t, bad()), http.StatusUnauthorized, "bad_signature")
	requireError(t, do(t, bad()), http.StatusTooManyRequests, "rate_limited")
	require.Contains(t, e.logs.String(), "code=rate_limited")
}

func TestWeakSecretsRefused(t *testing.T) {
	for name, s := range map[string]string{
		"16 spaces":       strings.Repeat(" ", 16),
		"31 bytes":        strings.Repeat("ab", 15) + "c",
		"repeated":        strings.Repeat("x", 64),
		"repeated spaces": strings.Repeat(" ", 40),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := resumehttp.New(resumehttp.Config{Runner: fakeRunner{}, Secret: []byte(s)})
			require.ErrorIs(t, err, resumehttp.ErrWeakSecret)
			require.ErrorIs(t, err, resumehttp.ErrInvalidConfig)
			require.ErrorIs(t, resumehttp.CheckSecret([]byte(s)), resumehttp.ErrWeakSecret)
		})
	}
	require.NoError(t, resumehttp.CheckSecret([]byte(strings.Repeat("ab", 16))))
}

func TestInvalidConfigRefused(t *testing.T) {
	secret := []byte(strings.Repeat("ab", 16))
	for name, cfg := range map[string]resumehttp.Config{
		"no runner":       {Secret: secret},
		"negative window": {Runner: fakeRunner{}, Secret: secret, Window: -1},
		"negative body":   {Runner: fakeRunner{}, Secret: secret, MaxBody: -1},
		"negative burst":  {Runner: fakeRunner{}, Secret: secret, FailureBurst: -1},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := resumehttp.New(cfg)
			require.ErrorIs(t, err, resumehttp.ErrInvalidConfig)
		})
	}
}

// A command's error is a 422 with the handler's message; a panic is a 500
// whose details are logged under the correlation ID the body carries. The
// machine is unchanged either way.
func TestCommandErrorsAndPanics(t *testing.T) {
	fail := command.New("fail", "Always fails.", func(ctx *command.Context[counter], _ struct{}) (int, error) {
		return 0, errors.New("out of stock")
	})
	boom := command.New("boom", "Panics.", func(ctx *command.Context[counter], _ struct{}) (int, error) {
		panic("secret detail 10.0.0.7")
	})
	e := newEnvWith(t, memstore.New(), nil, fail, boom)
	mid := e.create(t)
	before := e.fingerprint(t, mid)

	eb := requireError(t, e.call(t, "POST", "/machines/"+mid+"/commands/fail", ""), http.StatusUnprocessableEntity, "command_failed")
	require.Contains(t, eb.Error, "out of stock")
	require.Empty(t, eb.CorrelationID)
	e.requireUnchanged(t, before, mid)

	eb = requireError(t, e.call(t, "POST", "/machines/"+mid+"/commands/boom", ""), http.StatusInternalServerError, "internal")
	require.Equal(t, "internal error", eb.Error)
	require.NotEmpty(t, eb.CorrelationID)
	e.requireUnchanged(t, before, mid)
	line := logLine(t, e.logs.String(), "correlation_id="+eb.CorrelationID)
	require.Contains(t, line, "secret detail 10.0.0.7")
	require.Contains(t, line, "level=ERROR")
}

// logLine returns the log line holding want.
func logLine(t *testing.T, logs, want string) string {
	t.Helper()
	for line := range strings.Lines(logs) {
		if strings.Contains(line, want) {
			return line
		}
	}
	t.Fatalf("no log line with %q in:\n%s", want, logs)
	return ""
}

// panicRunner panics on every lookup.
type panicRunner struct{ fakeRunner }

func (panicRunner) Suspension(context.Context, string) (store.Suspension, error) {
	panic("runner bug")
}

// A panic in the handler itself is a 500 with a correlation ID, and the
// server goes on serving.
func TestHandlerPanic(t *testing.T) {
	logs := &syncBuffer{}
	e := fakeServer(t, panicRunner{}, logs)
	for range 2 {
		eb := requireError(t, e.call(t, "GET", "/suspensions/s1", ""), http.StatusInternalServerError, "internal")
		require.NotEmpty(t, eb.CorrelationID)
		line := logLine(t, logs.String(), "correlation_id="+eb.CorrelationID)
		require.Contains(t, line, "runner bug")
		require.Contains(t, line, "stack=")
	}
}

// IDs no store can hold are unknown, whatever the store.
func TestMalformedIDsAreNotFound(t *testing.T) {
	forEachEnv(t, func(t *testing.T, e *env) {
		mid, _ := e.start(t, "x")
		before := e.fingerprint(t, mid)
		for _, id := range []string{"%00", "s%00x", "%FF", "%E2%82", strings.Repeat("s", store.MaxIDLen+1)} {
			requireError(t, e.call(t, "GET", "/suspensions/"+id, ""), http.StatusNotFound, "unknown_suspension")
			requireError(t, e.call(t, "POST", resumePath(id), `{"payload":"x"}`), http.StatusNotFound, "unknown_suspension")
			requireError(t, e.call(t, "DELETE", "/suspensions/"+id, ""), http.StatusNotFound, "unknown_suspension")
			requireError(t, e.call(t, "GET", "/machines/"+id+"/commands", ""), http.StatusNotFound, "unknown_machine")
			requireError(t, e.call(t, "POST", "/machines/"+id+"/commands/bump", `{"input":{"by":1}}`), http.StatusNotFound, "unknown_machine")
			list := requireOK[resumehttp.SuspensionList](t, e.call(t, "GET", "/suspensions?machine="+id, ""))
			require.Empty(t, list.Suspensions)
		}
		e.requireUnchanged(t, before, mid)
	})
}

// Every answer is JSON, the mux's redirects of unclean paths too.
func TestRedirectsAreJSON(t *testing.T) {
	e := memEnv(t)
	mid, sid := e.start(t, "x")
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct{ method, path, body, location string }{
		{"GET", "//suspensions", "", "/suspensions"},
		{"GET", "/machines/../suspensions/" + sid, "", "/suspensions/" + sid},
		{"POST", "/suspensions/./" + sid + "/resume", `{"payload":"x"}`, "/suspensions/" + sid + "/resume"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			before := e.fingerprint(t, mid)
			req := e.signed(t, tc.method, tc.path, tc.body)
			resp, err := noFollow.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.GreaterOrEqual(t, resp.StatusCode, 300)
			require.Less(t, resp.StatusCode, 400)
			eb := requireError(t, response{Status: resp.StatusCode, Header: resp.Header, Body: b}, resp.StatusCode, "redirect")
			loc, err := url.Parse(resp.Header.Get("Location"))
			require.NoError(t, err)
			require.Equal(t, tc.location, loc.Path)
			require.Contains(t, eb.Error, tc.location)
			e.requireUnchanged(t, before, mid)
		})
	}
}

// An address has at most FailureBurst unverified bodies in the air: with
// that many uploads stalled, its next request is refused at once, body
// unread; verified requests give their count back, so a good client is
// never limited.
func TestStalledUploadsAreLimited(t *testing.T) {
	e := newEnvWith(t, memstore.New(), func(c *resumehttp.Config) {
		c.FailureBurst, c.FailureRefill = 3, time.Hour
	})
	_, sid := e.start(t, "x")
	ln := serve(t, e.handler, resumehttp.ServerConfig{})
	for range 20 {
		requireOK[resumehttp.Suspension](t, do(t, e.signed(t, "GET", "/suspensions/"+sid, "")))
	}

	// Three uploads that send their headers, a forged signature and a
	// tenth of their body, then stall.
	for range 3 {
		conn := dial(t, ln)
		req := e.request(t, "POST", resumePath(sid), "")
		resumehttp.SignRequest([]byte("another secret, just as long as the real one"), req, nil, e.clock.Now())
		head := "POST " + resumePath(sid) + " HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n" +
			resumehttp.HeaderTimestamp + ": " + req.Header.Get(resumehttp.HeaderTimestamp) + "\r\n" +
			resumehttp.HeaderSignature + ": " + req.Header.Get(resumehttp.HeaderSignature) + "\r\n\r\n"
		_, err := io.WriteString(conn, head+strings.Repeat("a", 100))
		require.NoError(t, err)
	}
	// The server reads the stalled uploads concurrently: poll until it
	// has started all three.
	var r response
	require.Eventually(t, func() bool {
		r = do(t, e.signed(t, "GET", "/suspensions/"+sid, ""))
		return r.Status == http.StatusTooManyRequests
	}, 10*time.Second, 5*time.Millisecond)
	requireError(t, r, http.StatusTooManyRequests, "rate_limited")
	r, read := rawRequest(t, ln, bigBody(e.signed(t, "POST", resumePath(sid), ""), 512<<10, true))
	requireError(t, r, http.StatusTooManyRequests, "rate_limited")
	require.Less(t, read, int64(64<<10))
}

// An oversized body is answered 413, read by the client, never a
// connection reset: the server reads the body (up to a bound) before it
// answers and closes, so a client that writes its whole request before
// reading the answer reads it. Declared or not.
func TestTooLargeArrivesAs413(t *testing.T) {
	// Each refused body counts as a failed authentication: 20 of them.
	e := newEnvWith(t, memstore.New(), func(c *resumehttp.Config) { c.FailureBurst = 20 })
	_, sid := e.start(t, "x")
	ln := serve(t, e.handler, resumehttp.ServerConfig{})
	for _, declare := range []bool{true, false} {
		for i := range 10 {
			req := bigBody(e.signed(t, "POST", resumePath(sid), ""), 12<<20, declare)
			conn := dial(t, ln)
			// The whole request first, as a simple client writes it.
			err := req.Write(conn)
			require.NoError(t, err, "declared %v, try %d: the server read the body", declare, i)
			resp, err := http.ReadResponse(bufio.NewReader(conn), req)
			require.NoError(t, err, "declared %v, try %d", declare, i)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			requireError(t, response{Status: resp.StatusCode, Header: resp.Header, Body: b}, http.StatusRequestEntityTooLarge, "body_too_large")
			conn.Close()
		}
	}
}
