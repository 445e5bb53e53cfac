package fakeapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/markov-agents/markov/llm"
)

// Flow is a two-call tool flow on one adapter's API, as the adapters'
// approval tests drive it: the first request carries the user's message
// alone and is answered with ToolReply (a call of Tool); the second carries
// that call's result and is answered with FinalReply. Requests decode into
// R, the part of the provider's request body the checks read.
type Flow[R any] struct {
	API API
	// Model returns the adapter pointed at a server of API.
	Model func(t *testing.T, srv *Server) llm.Model
	// Path is where the requests are POSTed; Rejection is the body of the
	// answer to a request that fails its check.
	Path, Rejection string
	// Tool is the only tool every request must offer.
	Tool                  string
	ToolReply, FinalReply string
	// Tools lists the names of the tools a request offers.
	Tools func(R) []string
	// First checks the first request: the user's message alone.
	First func(R) error
	// Second checks the second request: the tool call and its result,
	// whose text must be want.
	Second func(req R, want string) error
}

// Server starts the fake API for one run of the flow whose tool result is
// want. When the test ends it checks that both calls were made.
func (f Flow[R]) Server(t *testing.T, want string) *Server {
	t.Helper()
	srv := f.API.NewConversation(t, f.Path, f.Rejection,
		Turn{Reply: f.ToolReply, Check: f.check(f.First)},
		Turn{Reply: f.FinalReply, Check: f.check(func(req R) error { return f.Second(req, want) })},
	)
	t.Cleanup(func() {
		if n := len(srv.Requests()); n != 2 {
			t.Errorf("the flow made %d requests, want 2", n)
		}
	})
	return srv
}

// Models starts the fake API for one run of the flow whose tool result is
// want and returns the factory of the run's models, all pointed at it (a
// setup of refundtest.RunCases).
func (f Flow[R]) Models(t *testing.T, want string) func() llm.Model {
	srv := f.Server(t, want)
	return func() llm.Model { return f.Model(t, srv) }
}

// check decodes a request body, which must offer Tool alone, for check.
func (f Flow[R]) check(check func(R) error) func([]byte) error {
	return func(body []byte) error {
		var req R
		if err := json.Unmarshal(body, &req); err != nil {
			return fmt.Errorf("body is not JSON: %w", err)
		}
		if tools := f.Tools(req); !slices.Equal(tools, []string{f.Tool}) {
			return fmt.Errorf("want the one tool %s, got %v", f.Tool, tools)
		}
		return check(req)
	}
}
