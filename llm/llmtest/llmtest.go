// Package llmtest is the conformance suite for [llm.Model] adapters: the
// behaviour every adapter must show, whatever provider it talks to. An
// adapter's tests call [Run] with a [Harness] that turns canned replies,
// written in markov's terms, into a model answered by a fake provider:
//
//	func TestConformance(t *testing.T) {
//		llmtest.Run(t, llmtest.Harness{
//			Name: "acme",
//			New:  func(t *testing.T, replies ...llmtest.Reply) llmtest.Fake { … },
//		})
//	}
//
// The suite checks replies as the adapter returns them: text, tool calls
// and their results sent back, parallel calls, thinking with its signature
// (with [Capabilities.Thinking]), structured output, the stop reasons,
// usage, provider errors (named and reachable with [errors.As]), retries
// (with [Harness.Retrying]), context cancellation, [llm.CheckPairing]
// refusing an unpaired transcript or an invalid request ([llm.CheckRequest])
// before anything is sent, and concurrent calls. What a provider's wire
// format looks like is the adapter's own business: [Fake.Sent] hands it
// the requests of the scenarios worth a golden file.
//
// A model that is an [llm.Streamer] is checked streaming too: each reply
// streamed is the reply Generate returns for the same provider answer
// ([StreamReply]), with chunks that assemble into it ([CheckChunks]); a
// provider error before the stream, an error in it ([FaultError]) and a
// stream cut short ([FaultEOF]) fail it and never end it as a complete
// reply ([StreamError]); invalid requests and a canceled context fail it
// before anything is sent; and a caller may stop reading at any chunk.
package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// Reply is one canned answer of a fake provider, in markov's terms; the
// harness writes it in its provider's wire format.
type Reply struct {
	// Response is the reply when Status is zero. Its message holds, in
	// order, thinking parts (with [Capabilities.Thinking]), text or
	// structured parts (a structured part is the reply's text on the
	// wire) and tool uses.
	Response llm.Response
	// Status, when not zero, makes the provider fail the call with this
	// HTTP status and an error body, telling the client it may retry at
	// once.
	Status int
	// Fault, when set, makes a streamed reply fail partway; a call
	// without streaming gets the whole reply.
	Fault Fault
}

// Capabilities says which optional behaviours an adapter has.
type Capabilities struct {
	// Thinking: replies carry thinking parts with their signatures, and
	// the adapter replays them when they come back in the transcript.
	Thinking bool
	// Structured: a JSON reply to a request for structured output comes
	// back as a [message.Structured] part (otherwise as text, which the
	// executor parses).
	Structured bool
}

// Fake is a model under test with the fake provider behind it.
type Fake struct {
	// Model is the adapter, answered by the provider.
	Model llm.Model
	// Calls returns how many calls reached the provider so far.
	Calls func() int
	// Sent, if set, is called at the end of the scenarios whose requests
	// show the adapter's mapping (text, tool results, thinking, structured
	// output, max tokens) with the last request and a name for a golden
	// file of what the provider received for it.
	Sent func(t *testing.T, name string, req *llm.Request)
}

// Harness plugs an adapter into the suite.
type Harness struct {
	// Name is the provider's name: every error the adapter returns for a
	// provider error or a refused transcript starts with Name + ": ".
	Name string
	// Caps are the adapter's optional behaviours.
	Caps Capabilities
	// New returns a Fake whose provider answers the model's calls, in
	// order, with replies, and whose model does not retry. A call beyond
	// the last reply fails the test.
	New func(t *testing.T, replies ...Reply) Fake
	// Retrying, if set, is New with a model that retries a failed call
	// up to retries times.
	Retrying func(t *testing.T, retries int, replies ...Reply) Fake
	// APIError returns the HTTP status carried by the provider's own
	// error type found in err with [errors.As], and false if err holds
	// none.
	APIError func(err error) (status int, ok bool)
}

// StatusOf returns a [Harness.APIError] for adapters whose provider
// errors have the type E, status reading the HTTP status of one.
func StatusOf[E error](status func(E) int) func(error) (int, bool) {
	return func(err error) (int, bool) {
		var e E
		if errors.As(err, &e) {
			return status(e), true
		}
		return 0, false
	}
}

// Run runs the conformance suite against the adapter h describes, one
// subtest per behaviour.
func Run(t *testing.T, h Harness) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
		skip bool
	}{
		{"Text", testText, false},
		{"ToolRoundTrip", testToolRoundTrip, false},
		{"ParallelToolCalls", testParallelToolCalls, false},
		{"Thinking", testThinking, !h.Caps.Thinking},
		{"StructuredOutput", testStructuredOutput, false},
		{"StopReasons", testStopReasons, false},
		{"ProviderError", testProviderError, false},
		{"Retries", testRetries, h.Retrying == nil},
		{"ContextCanceled", testContextCanceled, false},
		{"UnpairedHistory", testUnpairedHistory, false},
		{"InvalidRequest", testInvalidRequest, false},
		{"Concurrent", testConcurrent, false},
		{"Stream", testStream, false},
	}
	for _, tc := range tests {
		if tc.skip {
			continue
		}
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// Tools the suite offers the model.
var (
	lookupOrderTool = llm.ToolSpec{
		Name:        "lookup_order",
		Description: "Look up an order by ID.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"integer"}},"required":["order_id"],"additionalProperties":false}`),
	}
	refundTool = llm.ToolSpec{
		Name:        "refund",
		Description: "Refund an order.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"integer"},"reason":{"type":"string"}},"required":["order_id"]}`),
	}
	weatherTool = llm.ToolSpec{
		Name:        "get_weather",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string"}}}`),
	}
	// timeTool has no schema: adapters send an empty object schema.
	timeTool = llm.ToolSpec{Name: "get_time"}
)

// answer is a reply that says text and ends the turn.
func answer(text string) Reply {
	return Reply{Response: llm.Response{
		Message:    assistant(message.Text(text)),
		StopReason: llm.EndTurn,
		Usage:      llm.Usage{InputTokens: 20, OutputTokens: 8},
	}}
}

// assistant returns an assistant message of parts.
func assistant(parts ...message.Part) message.Message {
	return message.Message{Role: message.Assistant, Parts: parts}
}

// results returns a tool message of parts.
func results(parts ...message.Part) message.Message {
	return message.Message{Role: message.Tool, Parts: parts}
}

// generate calls f's model and requires success.
func generate(t *testing.T, f Fake, req *llm.Request) *llm.Response {
	t.Helper()
	resp, err := f.Model.Generate(context.Background(), req)
	require.NoError(t, err)
	return resp
}

// sent hands the last request, req, to the adapter's golden check.
func sent(t *testing.T, f Fake, name string, req *llm.Request) {
	t.Helper()
	if f.Sent != nil {
		f.Sent(t, name, req)
	}
}

// diff fails the test if got is not want. A reply wanted without an ID
// and a model matches whatever ID and model the provider gave: the
// suite's expectations are the same for every provider.
func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if w, ok := want.(*llm.Response); ok && w != nil && w.ID == "" && w.Model == "" {
		if g, ok := got.(*llm.Response); ok && g != nil {
			c := *g
			c.ID, c.Model = "", ""
			got = &c
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("%s (-want +got):\n%s", what, d)
	}
}

// providerError requires err to name the provider and to carry its error
// type with status.
func providerError(t *testing.T, h Harness, err error, status int) {
	t.Helper()
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), h.Name+": "), "error %q does not name the provider %s", err, h.Name)
	got, ok := h.APIError(err)
	require.True(t, ok, "error %q does not hold the provider's error type", err)
	require.Equal(t, status, got)
}

func testText(t *testing.T, h Harness) {
	want := llm.Response{
		Message:    assistant(message.Text("Hello! How can I help you today?")),
		StopReason: llm.EndTurn,
		Usage:      llm.Usage{InputTokens: 12, OutputTokens: 10, CacheReadTokens: 1024, CacheWriteTokens: 30},
	}
	f := h.New(t, Reply{Response: want})
	req := &llm.Request{
		System:   "You are terse.",
		Messages: []message.Message{message.UserText("Hi")},
	}
	resp := generate(t, f, req)
	diff(t, "response", &want, resp)
	require.Equal(t, 1, f.Calls())
	sent(t, f, "text", req)
}

func testToolRoundTrip(t *testing.T, h Harness) {
	use := message.ToolUse("use_lookup_42", "lookup_order", json.RawMessage(`{"order_id":42}`))
	first := llm.Response{
		Message:    assistant(message.Text("I'll look up the order first."), use),
		StopReason: llm.ToolUse,
		Usage:      llm.Usage{InputTokens: 300, OutputTokens: 40},
	}
	f := h.New(t, Reply{Response: first}, answer("Order 42 has been refunded."))
	req := &llm.Request{
		System:   "You handle refunds.",
		Messages: []message.Message{message.UserText("Refund order 42, it arrived broken.")},
		Tools:    []llm.ToolSpec{lookupOrderTool, refundTool},
	}
	resp := generate(t, f, req)
	diff(t, "tool-use reply", &first, resp)

	req.Messages = append(req.Messages,
		resp.Message,
		results(message.ToolResult(use.ID, `{"id":42,"status":"delivered","total":42.5}`, false)),
		// A user message right after the results.
		message.UserText("Please hurry."),
	)
	resp = generate(t, f, req)
	require.Equal(t, llm.EndTurn, resp.StopReason)
	require.Equal(t, "Order 42 has been refunded.", resp.Message.Text())
	require.Equal(t, 2, f.Calls())
	sent(t, f, "tool_round_trip", req)
}

func testParallelToolCalls(t *testing.T, h Harness) {
	uses := []message.Part{
		message.ToolUse("use_1", "get_weather", json.RawMessage(`{"city":"Paris"}`)),
		message.ToolUse("use_2", "get_weather", json.RawMessage(`{"city":"Tokyo","units":"metric"}`)),
		message.ToolUse("use_3", "get_time", json.RawMessage(`{}`)),
	}
	first := llm.Response{Message: assistant(uses...), StopReason: llm.ToolUse, Usage: llm.Usage{InputTokens: 90, OutputTokens: 60}}
	f := h.New(t, Reply{Response: first}, answer("Paris: 18°C; Tokyo: unknown; 12:00 UTC."))
	req := &llm.Request{
		Messages: []message.Message{message.UserText("Weather in Paris and Tokyo, and the time?")},
		Tools:    []llm.ToolSpec{weatherTool, timeTool},
	}
	resp := generate(t, f, req)
	diff(t, "parallel tool uses", &first, resp)

	// The results arrive out of order, and the second call failed: the
	// provider gets them paired with their uses.
	req.Messages = append(req.Messages, resp.Message, results(
		message.ToolResult("use_3", "12:00 UTC", false),
		message.ToolResult("use_2", "weather service unavailable", true),
		message.ToolResult("use_1", "18°C, cloudy", false),
	))
	resp = generate(t, f, req)
	require.Equal(t, "Paris: 18°C; Tokyo: unknown; 12:00 UTC.", resp.Message.Text())
	sent(t, f, "parallel_tool_results", req)
}

func testThinking(t *testing.T, h Harness) {
	use := message.ToolUse("use_weather", "get_weather", json.RawMessage(`{"city":"Paris"}`))
	first := llm.Response{
		Message: assistant(
			message.Thinking("The user wants the weather in Paris: call get_weather.", "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"),
			use,
		),
		StopReason: llm.ToolUse,
		Usage:      llm.Usage{InputTokens: 120, OutputTokens: 70},
	}
	f := h.New(t, Reply{Response: first}, answer("It is 18°C in Paris."))
	req := &llm.Request{
		Messages: []message.Message{message.UserText("Weather in Paris?")},
		Tools:    []llm.ToolSpec{weatherTool},
	}
	resp := generate(t, f, req)
	diff(t, "thinking reply", &first, resp)

	// The thinking goes back with the tool use, signature unchanged.
	req.Messages = append(req.Messages, resp.Message, results(message.ToolResult(use.ID, "18°C", false)))
	resp = generate(t, f, req)
	require.Equal(t, "It is 18°C in Paris.", resp.Message.Text())
	sent(t, f, "thinking_replayed", req)
}

func testStructuredOutput(t *testing.T, h Harness) {
	// Property order differs from alphabetical on purpose: the schema must
	// reach the provider byte for byte.
	schema := `{"type":"object","properties":{"verdict":{"type":"string","enum":["approve","deny"]},"amount":{"type":"number"},"reasons":{"type":"array","items":{"type":"string"}}},"required":["verdict","amount","reasons"],"additionalProperties":false}`
	text := `{"verdict":"approve","amount":42.5,"reasons":["damaged on arrival"]}`
	part := message.Structured(json.RawMessage(text), text)
	f := h.New(t, Reply{Response: llm.Response{Message: assistant(part), StopReason: llm.EndTurn}})
	req := &llm.Request{
		Messages: []message.Message{message.UserText("Should we refund order 42?")},
		Output:   &llm.OutputSpec{Name: "decision", Schema: json.RawMessage(schema)},
	}
	resp := generate(t, f, req)
	if !h.Caps.Structured {
		part = message.Text(text)
	}
	diff(t, "structured reply", []message.Part{part}, resp.Message.Parts)
	sent(t, f, "structured", req)
}

func testStopReasons(t *testing.T, h Harness) {
	tests := []struct {
		stop  llm.StopReason
		parts []message.Part
	}{
		{llm.EndTurn, []message.Part{message.Text("Done.")}},
		{llm.ToolUse, []message.Part{message.ToolUse("use_1", "get_time", json.RawMessage(`{}`))}},
		// Cut off: the partial text is kept.
		{llm.MaxTokens, []message.Part{message.Text("Once upon a time, in a land far")}},
		{llm.Refusal, []message.Part{message.Text("I can't help with that.")}},
	}
	for _, tt := range tests {
		t.Run(string(tt.stop), func(t *testing.T) {
			want := llm.Response{Message: assistant(tt.parts...), StopReason: tt.stop, Usage: llm.Usage{InputTokens: 10, OutputTokens: 10}}
			f := h.New(t, Reply{Response: want})
			req := &llm.Request{
				Messages: []message.Message{message.UserText("Tell me a long story.")},
				Tools:    []llm.ToolSpec{timeTool},
				Settings: llm.Settings{MaxTokens: 10},
			}
			resp := generate(t, f, req)
			diff(t, "response", &want, resp)
			if tt.stop == llm.MaxTokens {
				sent(t, f, "max_tokens", req)
			}
		})
	}
}

func testProviderError(t *testing.T, h Harness) {
	f := h.New(t, Reply{Status: 429})
	_, err := f.Model.Generate(context.Background(), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
	providerError(t, h, err, 429)
	require.Equal(t, 1, f.Calls(), "the model retried although it should not")
}

func testRetries(t *testing.T, h Harness) {
	req := &llm.Request{Messages: []message.Message{message.UserText("Hi")}}
	t.Run("exhausted", func(t *testing.T) {
		f := h.Retrying(t, 2, Reply{Status: 500}, Reply{Status: 503}, Reply{Status: 500})
		_, err := f.Model.Generate(context.Background(), req)
		providerError(t, h, err, 500)
		require.Equal(t, 3, f.Calls())
	})
	t.Run("then success", func(t *testing.T) {
		f := h.Retrying(t, 2, Reply{Status: 429}, answer("Hello!"))
		resp := generate(t, f, req)
		require.Equal(t, "Hello!", resp.Message.Text())
		require.Equal(t, 2, f.Calls())
	})
}

func testContextCanceled(t *testing.T, h Harness) {
	f := h.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.Model.Generate(ctx, &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
	require.True(t, errors.Is(err, context.Canceled), "got %v", err)
	require.Zero(t, f.Calls())
}

func testUnpairedHistory(t *testing.T, h Harness) {
	f := h.New(t)
	_, err := f.Model.Generate(context.Background(), &llm.Request{Messages: []message.Message{
		message.UserText("Refund order 42"),
		assistant(message.ToolUse("use_unanswered", "refund", json.RawMessage(`{"order_id":42}`))),
		message.UserText("hello?"),
	}})
	require.ErrorIs(t, err, llm.ErrMalformedHistory)
	require.True(t, strings.HasPrefix(err.Error(), h.Name+": "), "error %q does not name the provider %s", err, h.Name)
	require.Contains(t, err.Error(), "use_unanswered")
	require.Zero(t, f.Calls(), "a malformed transcript reached the provider")
}

func testInvalidRequest(t *testing.T, h Harness) {
	hi := []message.Message{message.UserText("Hi")}
	tests := []struct {
		name string
		req  *llm.Request
		want error
	}{
		{"nil", nil, llm.ErrNilRequest},
		{"tool schema not an object", &llm.Request{Messages: hi, Tools: []llm.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}}, llm.ErrInvalidSpec},
		{"tool without a name", &llm.Request{Messages: hi, Tools: []llm.ToolSpec{{InputSchema: json.RawMessage(`{}`)}}}, llm.ErrInvalidSpec},
		{"output schema not JSON", &llm.Request{Messages: hi, Output: &llm.OutputSpec{Name: "o", Schema: json.RawMessage(`{`)}}, llm.ErrInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := h.New(t)
			_, err := f.Model.Generate(context.Background(), tt.req)
			require.ErrorIs(t, err, tt.want)
			require.True(t, strings.HasPrefix(err.Error(), h.Name+": "), "error %q does not name the provider %s", err, h.Name)
			require.Zero(t, f.Calls(), "an invalid request reached the provider")
		})
	}
}

func testConcurrent(t *testing.T, h Harness) {
	const n = 8
	replies := make([]Reply, n)
	for i := range replies {
		replies[i] = answer("Hello!")
	}
	f := h.New(t, replies...)
	req := &llm.Request{Messages: []message.Message{message.UserText("Hi")}}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = f.Model.Generate(context.Background(), req)
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, n, f.Calls())
}
