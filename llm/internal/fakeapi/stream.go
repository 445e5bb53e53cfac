package fakeapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/llmtest"
	"github.com/markov-agents/markov/message"
)

// StreamCase is one reply recorded both ways: File, the JSON body the API
// answers a call without streaming with, and Stream, the event stream it
// sends for the same reply streamed.
type StreamCase struct {
	Name         string
	File, Stream string
	// Request is the request sent; nil means a user's "Hi".
	Request *llm.Request
}

// CheckStreams requires, for each case, the reply streamed from its Stream
// fixture (checked with llmtest.StreamReply) to be deep-equal to the one
// Generate returns for its File: message, stop reason and usage. The
// adapter must stream only when asked to.
func (a Adapter[C, M]) CheckStreams(t *testing.T, cases []StreamCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			srv := a.NewServer(t, Reply{File: c.File}, Reply{File: c.Stream})
			m := a.Model(t, srv)
			req := request(c.Request)
			want, err := m.Generate(context.Background(), req)
			require.NoError(t, err)
			s, ok := m.(llm.Streamer)
			require.True(t, ok, "the model does not stream")
			got := llmtest.StreamReply(t, s, req)
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("streamed reply (-generated +streamed):\n%s", d)
			}
			require.Equal(t, true, srv.LastBody(t)["stream"], "the streamed call did not ask for streaming")
		})
	}
}

// StreamFailure is an event stream that fails partway.
type StreamFailure struct {
	Name string
	// Stream is the fixture; with Abort, the connection is cut after it.
	Stream string
	Abort  bool
	// Check checks the stream's error.
	Check func(t *testing.T, err error)
}

// CheckStreamFailures requires each case's stream to fail with an error
// named after the provider and checked by its Check, after partial chunks
// and without an end chunk (llmtest.StreamError): a cut reply is never a
// complete one.
func (a Adapter[C, M]) CheckStreamFailures(t *testing.T, cases []StreamFailure) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			srv := a.NewServer(t, Reply{File: c.Stream, Abort: c.Abort})
			s, ok := a.Model(t, srv).(llm.Streamer)
			require.True(t, ok, "the model does not stream")
			err := llmtest.StreamError(t, context.Background(), s, request(nil))
			require.True(t, strings.HasPrefix(err.Error(), a.Provider+": "), "error %q does not name the provider", err)
			c.Check(t, err)
		})
	}
}

// request returns req, or a user's "Hi" when it is nil.
func request(req *llm.Request) *llm.Request {
	if req == nil {
		return &llm.Request{Messages: []message.Message{message.UserText("Hi")}}
	}
	return req
}

// FuzzStream fuzzes the adapter's streaming with arbitrary bodies served
// as an event stream, seeded with the fixtures named: whatever the body, a
// stream never panics, its chunks come in an order an llm.Accumulator
// takes, and it ends either with one end chunk or with one error, never
// both and never neither.
func (a Adapter[C, M]) FuzzStream(f *testing.F, seeds ...string) {
	for _, name := range seeds {
		f.Add(a.ReadFile(f, name))
	}
	var body atomic.Pointer[[]byte]
	srv := &Server{Server: httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(*body.Load())
	}))}
	f.Cleanup(srv.Close)
	f.Fuzz(func(t *testing.T, data []byte) {
		body.Store(&data)
		s, ok := a.Model(t, srv).(llm.Streamer)
		require.True(t, ok, "the model does not stream")
		var acc llm.Accumulator
		var ended, failed bool
		for c, err := range s.Stream(context.Background(), request(nil)) {
			if ended || failed {
				t.Fatalf("chunk %+v, error %v after the end or an error", c, err)
			}
			if err != nil {
				failed = true
				continue
			}
			if err := acc.Add(c); err != nil {
				t.Fatalf("chunk %+v: %v", c, err)
			}
			ended = c.Kind == llm.ChunkEnd
		}
		if !ended && !failed {
			t.Fatal("the stream stopped without an end or an error")
		}
	})
}
