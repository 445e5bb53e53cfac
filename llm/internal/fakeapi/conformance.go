package fakeapi

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/llmtest"
)

// Conformance is what an adapter adds to run the llmtest conformance
// suite: how its provider writes a reply.
type Conformance struct {
	// Caps are the harness's (see llmtest.Harness).
	Caps llmtest.Capabilities
	// Encode writes a reply in the provider's wire format: a response as a
	// 200 body, a Status as an error body with that status.
	Encode func(t *testing.T, r llmtest.Reply) Reply
	// EncodeStream writes a response (Status is zero) as the provider
	// streams it, with its Fault: a text/event-stream body.
	EncodeStream func(t *testing.T, r llmtest.Reply) string
	// APIError is the harness's (see llmtest.Harness).
	APIError func(err error) (status int, ok bool)
	// Path is where every call POSTs to ("/v1/messages").
	Path string
	// Header lists headers every call carries (the API key).
	Header map[string]string
}

// RunConformance runs the llmtest conformance suite on the adapter with
// the harness of c: every fake is a server of the adapter's API answering
// with the encoded replies, streamed to a request that asks for streaming
// (an error reply lets the client retry after a millisecond). The requests
// the suite hands over must go to c.Path with c.Header; they are compared
// with golden files in the fixture directory's "conformance" folder, and
// must carry every tool and output schema byte for byte (a golden file
// compares JSON values, blind to the property order models follow).
func (a Adapter[C, M]) RunConformance(t *testing.T, c Conformance) {
	fake := func(t *testing.T, retries int, replies ...llmtest.Reply) llmtest.Fake {
		t.Helper()
		wire := make([]Reply, len(replies))
		for i, r := range replies {
			wire[i] = c.Encode(t, r)
			if r.Status != 0 {
				wire[i].Header = maps.Clone(wire[i].Header)
				if wire[i].Header == nil {
					wire[i].Header = make(map[string]string)
				}
				wire[i].Header["Retry-After-Ms"] = "1"
			}
		}
		srv := a.NewResponder(t, func(n int, req Request) Reply {
			if n > len(wire) {
				t.Errorf("unexpected request %d", n)
				return Reply{Status: http.StatusTeapot, Body: "no reply left"}
			}
			if replies[n-1].Status == 0 && streamed(req) {
				return Reply{Body: c.EncodeStream(t, replies[n-1]), Header: map[string]string{"Content-Type": "text/event-stream"}}
			}
			return wire[n-1]
		})
		return llmtest.Fake{
			Model: a.NewModel(t, srv, a.edit(func(f fields) { *f.MaxRetries = new(retries) })),
			Calls: func() int { return len(srv.Requests()) },
			Sent: func(t *testing.T, name string, req *llm.Request) {
				t.Helper()
				reqs := srv.Requests()
				require.NotEmpty(t, reqs, "no request received")
				last := reqs[len(reqs)-1]
				require.Equal(t, http.MethodPost, last.Method)
				require.Equal(t, c.Path, last.Path)
				for k, v := range c.Header {
					require.Equal(t, v, last.Header.Get(k), "header %s", k)
				}
				a.Golden(t, filepath.Join("conformance", name+".request.json"), last.Body)
				verbatimSchemas(t, req, last.Body)
			},
		}
	}
	llmtest.Run(t, llmtest.Harness{
		Name:     a.Provider,
		Caps:     c.Caps,
		New:      func(t *testing.T, replies ...llmtest.Reply) llmtest.Fake { return fake(t, 0, replies...) },
		Retrying: fake,
		APIError: c.APIError,
	})
}

// verbatimSchemas requires body to hold the schemas of req's tools and
// output unchanged.
func verbatimSchemas(t *testing.T, req *llm.Request, body []byte) {
	t.Helper()
	schemas := make([]json.RawMessage, 0, len(req.Tools)+1)
	for _, tool := range req.Tools {
		schemas = append(schemas, tool.InputSchema)
	}
	if req.Output != nil {
		schemas = append(schemas, req.Output.Schema)
	}
	for _, s := range schemas {
		require.True(t, bytes.Contains(body, s), "the request does not carry the schema %s byte for byte: %s", s, body)
	}
}

// streamed reports whether req asks for a streamed reply.
func streamed(req Request) bool {
	var body struct {
		Stream bool `json:"stream"`
	}
	return json.Unmarshal(req.Body, &body) == nil && body.Stream
}

// Pieces cuts s in two at a rune boundary near its middle, as a provider
// streams a text in deltas; an empty s has no pieces, and a one-rune s one.
func Pieces(s string) []string {
	if s == "" {
		return nil
	}
	mid := len(s) / 2
	for mid > 0 && !utf8.RuneStart(s[mid]) {
		mid--
	}
	if mid == 0 {
		return []string{s}
	}
	return []string{s[:mid], s[mid:]}
}

// Event writes one server-sent event: name (none when empty) and data
// encoded as JSON.
func Event(t *testing.T, b *strings.Builder, name string, data any) {
	t.Helper()
	js, err := json.Marshal(data)
	require.NoError(t, err)
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: " + string(js) + "\n\n")
}
