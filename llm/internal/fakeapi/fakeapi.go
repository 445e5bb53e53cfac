// Package fakeapi is the test scaffolding the provider adapters share: a
// fake HTTP API that answers with canned replies (usually fixture files
// from testdata) and records every request, golden request bodies
// compared semantically and rewritten with -update, and an Adapter: an
// adapter built hermetic against the fake, with the checks every adapter
// passes (the llmtest conformance suite among them).
//
// It is imported only by tests.
package fakeapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// update is the -update flag of every test binary that imports fakeapi:
// with it, Golden rewrites the golden files instead of comparing.
var update = flag.Bool("update", false, "rewrite the golden request files in testdata")

// API describes what differs between the providers' fake servers and
// where their fixtures live. The zero value serves fixtures from testdata:
// a recorded event stream (a .sse file) as text/event-stream, anything
// else as JSON.
type API struct {
	// Dir is the fixture directory; "testdata" when empty.
	Dir string
	// Header is set on every reply (a request ID, say).
	Header map[string]string
}

// Reply is one canned HTTP response: a status and a fixture file (or a
// literal body), plus headers.
type Reply struct {
	// Status is the HTTP status; 200 when zero.
	Status int
	// File names a fixture in the API's directory; when set it is the
	// body and Body is ignored.
	File string
	// Body is the literal body when File is empty.
	Body string
	// Header is set on the reply after the API's own headers.
	Header map[string]string
	// Abort drops the connection after the body instead of ending the
	// response: the client sees a connection cut mid-stream.
	Abort bool
}

// Request is one request a Server received.
type Request struct {
	// Method and Path are the request's method and URL path.
	Method, Path string
	// Header is a copy of the request headers.
	Header http.Header
	// Body is the whole request body.
	Body []byte
}

// Responder chooses the reply to the nth request (counting from 1). The
// server calls it for one request at a time.
type Responder func(n int, req Request) Reply

// Server is a fake API over HTTP. It records every request and answers
// with its replies in order, or with a Responder. Its URL is the base URL
// to give the adapter; it is closed when the test ends.
type Server struct {
	*httptest.Server
	t       *testing.T
	api     API
	respond Responder

	mu       sync.Mutex
	replies  []Reply
	requests []Request
}

// NewServer starts a server that answers with replies in order. A request
// beyond the last reply fails the test.
func (a API) NewServer(t *testing.T, replies ...Reply) *Server {
	t.Helper()
	return a.start(t, &Server{replies: replies})
}

// NewResponder starts a server that answers every request with respond,
// for a fake that checks each request or answers by what it was sent.
func (a API) NewResponder(t *testing.T, respond Responder) *Server {
	t.Helper()
	return a.start(t, &Server{respond: respond})
}

func (a API) start(t *testing.T, s *Server) *Server {
	t.Helper()
	s.t, s.api = t, a
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("reading request body: %v", err)
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	n := len(s.requests)
	rep, ok := s.next(n, req)
	s.mu.Unlock()
	if !ok {
		s.t.Errorf("unexpected request %d to %s", n, r.URL.Path)
		http.Error(w, "no reply left", http.StatusTeapot)
		return
	}

	data := []byte(rep.Body)
	if rep.File != "" {
		data = s.api.ReadFile(s.t, rep.File)
	}
	contentType := "application/json"
	if filepath.Ext(rep.File) == ".sse" {
		contentType = "text/event-stream"
	}
	w.Header().Set("Content-Type", contentType)
	for k, v := range s.api.Header {
		w.Header().Set(k, v)
	}
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	status := rep.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(data)
	if rep.Abort {
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // closes the connection mid-response
	}
}

// next returns the reply to the nth request, false when none is left. The
// caller holds s.mu.
func (s *Server) next(n int, req Request) (Reply, bool) {
	if s.respond != nil {
		return s.respond(n, req), true
	}
	if len(s.replies) == 0 {
		return Reply{}, false
	}
	rep := s.replies[0]
	s.replies = s.replies[1:]
	return rep, true
}

// Requests returns what the server received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// LastBody returns the JSON body of the last request, decoded.
func (s *Server) LastBody(t *testing.T) map[string]any {
	t.Helper()
	reqs := s.Requests()
	require.NotEmpty(t, reqs, "no request received")
	var m map[string]any
	require.NoError(t, json.Unmarshal(reqs[len(reqs)-1].Body, &m))
	return m
}

// dir returns the fixture directory.
func (a API) dir() string {
	if a.Dir == "" {
		return "testdata"
	}
	return a.Dir
}

// ReadFile returns the fixture name, failing the test if it cannot be
// read.
func (a API) ReadFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(a.dir(), name))
	if err != nil {
		t.Fatalf("reading fixture: %v", err)
	}
	return data
}

// Golden compares a JSON request body with the golden fixture file
// semantically (key order and spacing do not matter). With -update it
// rewrites the golden file first, indented (review the diff).
func (a API) Golden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		var buf bytes.Buffer
		require.NoError(t, json.Indent(&buf, got, "", "  "))
		buf.WriteByte('\n')
		require.NoError(t, os.WriteFile(filepath.Join(a.dir(), file), buf.Bytes(), 0o644))
	}
	var want, have any
	require.NoError(t, json.Unmarshal(a.ReadFile(t, file), &want), "golden %s", file)
	require.NoError(t, json.Unmarshal(got, &have))
	if d := cmp.Diff(want, have); d != "" {
		t.Fatalf("request body differs from %s (-want +got):\n%s\ngot: %s", file, d, got)
	}
}

// Turn is one call of a conversation: the check its request body must
// pass, and the body of the reply.
type Turn struct {
	Check func(body []byte) error
	Reply string
}

// NewConversation starts a server answering POSTs to path with the turns'
// replies in order, each once its request passed the turn's check. A
// request that fails its check, goes elsewhere or comes after the last
// turn fails the test and is answered 400 with the body rejection.
func (a API) NewConversation(t *testing.T, path, rejection string, turns ...Turn) *Server {
	t.Helper()
	return a.NewResponder(t, func(n int, r Request) Reply {
		err := fmt.Errorf("unexpected %s %s", r.Method, r.Path)
		switch {
		case r.Method != http.MethodPost || r.Path != path:
		case n > len(turns):
			err = errors.New("unexpected request")
		default:
			if err = turns[n-1].Check(r.Body); err == nil {
				return Reply{Body: turns[n-1].Reply}
			}
		}
		t.Errorf("request %d: %v: %s", n, err, r.Body)
		return Reply{Status: http.StatusBadRequest, Body: rejection}
	})
}
