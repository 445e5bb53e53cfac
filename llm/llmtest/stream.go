package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// Fault is how a streamed reply fails partway; the harness writes it in
// its provider's stream format. A call without streaming gets the whole
// reply.
type Fault uint8

// The faults a streamed reply can have.
const (
	// NoFault: the reply streams in full.
	NoFault Fault = iota
	// FaultError: after the first content delta the provider sends an
	// error in the stream (Anthropic's error event, an error chunk for
	// Chat Completions) and stops.
	FaultError
	// FaultEOF: the stream ends after the first content delta without its
	// terminal event, as when a proxy closes the connection early.
	FaultEOF
)

// StreamReply streams s's reply to req and checks it as every [llm.Streamer]
// must stream: no error, chunks an [llm.Accumulator] takes in order, one
// [llm.ChunkEnd] and nothing after it, and deltas that assemble into the
// parts of the end's response (see [CheckChunks]). It returns the end's
// response.
func StreamReply(t *testing.T, s llm.Streamer, req *llm.Request) *llm.Response {
	t.Helper()
	var chunks []llm.Chunk
	for c, err := range s.Stream(context.Background(), req) {
		require.NoError(t, err, "after %d chunks", len(chunks))
		chunks = append(chunks, c)
	}
	require.NotEmpty(t, chunks, "no chunk")
	end := chunks[len(chunks)-1]
	require.Equal(t, llm.ChunkEnd, end.Kind, "the last chunk is not the end")
	CheckChunks(t, chunks[:len(chunks)-1], end.Response)
	return end.Response
}

// StreamError streams s's reply to req, which must fail: it returns the
// error, requiring that it comes once, last, and after no
// [llm.ChunkEnd] (a failed stream is never a complete reply), and that the
// chunks before it are well ordered.
func StreamError(t *testing.T, ctx context.Context, s llm.Streamer, req *llm.Request) error {
	t.Helper()
	var acc llm.Accumulator
	var failed error
	for c, err := range s.Stream(ctx, req) {
		require.NoError(t, failed, "the stream went on after its error")
		if err != nil {
			failed = err
			continue
		}
		require.NotEqual(t, llm.ChunkEnd, c.Kind, "a failing stream ended as a complete reply")
		require.NoError(t, acc.Add(c))
	}
	require.Error(t, failed, "the stream did not fail")
	_, err := acc.Response()
	require.ErrorIs(t, err, llm.ErrIncompleteStream)
	return failed
}

// CheckChunks requires chunks, a streamed reply without its end, to be in
// an order an [llm.Accumulator] takes and to assemble into the parts of
// resp: a text block for each text or structured part with its text, a
// thinking block with the part's text and signature, and a tool use with
// its ID, name and input (compared as JSON values, after [llm.ToolInput]).
func CheckChunks(t *testing.T, chunks []llm.Chunk, resp *llm.Response) {
	t.Helper()
	require.NotNil(t, resp, "no response")
	var acc llm.Accumulator
	for i, c := range chunks {
		require.NoError(t, acc.Add(c), "chunk %d", i)
	}
	got := acc.Message().Parts
	want := resp.Message.Parts
	require.Len(t, got, len(want), "the chunks assemble into %d parts, the reply has %d", len(got), len(want))
	for i, p := range want {
		b := got[i]
		switch p.Kind {
		case message.KindText, message.KindStructured:
			text := p.Text
			if text == "" {
				text = string(p.Data)
			}
			require.Equal(t, message.KindText, b.Kind, "part %d", i)
			require.Equal(t, text, b.Text, "part %d", i)
		case message.KindThinking:
			diff(t, "thinking part", p, b)
		case message.KindToolUse:
			require.Equal(t, message.KindToolUse, b.Kind, "part %d", i)
			require.Equal(t, p.ID, b.ID, "part %d", i)
			require.Equal(t, p.Name, b.Name, "part %d", i)
			require.JSONEq(t, string(p.Data), string(llm.ToolInput(b.Data)), "part %d", i)
		default:
			t.Fatalf("part %d: a reply cannot hold a %v part", i, p.Kind)
		}
	}
}

// testStream runs the streaming checks on an adapter whose model is an
// [llm.Streamer].
func testStream(t *testing.T, h Harness) {
	if _, ok := h.New(t).Model.(llm.Streamer); !ok {
		t.Skipf("%s does not stream", h.Name)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"SameReply", testStreamSameReply},
		{"ProviderError", testStreamProviderError},
		{"ErrorMidStream", testStreamErrorMidStream},
		{"CutShort", testStreamCutShort},
		{"InvalidRequest", testStreamInvalidRequest},
		{"Break", testStreamBreak},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// streamer returns f's model as a Streamer.
func streamer(f Fake) llm.Streamer { return f.Model.(llm.Streamer) }

// testStreamSameReply: a streamed reply is the reply Generate returns for
// the same provider answer.
func testStreamSameReply(t *testing.T, h Harness) {
	hi := []message.Message{message.UserText("Hi")}
	schema := json.RawMessage(`{"type":"object","properties":{"verdict":{"type":"string"}},"required":["verdict"],"additionalProperties":false}`)
	uses := []message.Part{
		message.ToolUse("use_1", "get_weather", json.RawMessage(`{"city":"Paris"}`)),
		message.ToolUse("use_2", "get_weather", json.RawMessage(`{"city":"Tokyo","units":"metric"}`)),
		message.ToolUse("use_3", "get_time", json.RawMessage(`{}`)),
	}
	tests := []struct {
		name string
		resp llm.Response
		req  *llm.Request
		skip bool
	}{
		{name: "text", resp: llm.Response{
			Message:    assistant(message.Text("Hello! How can I help you today?")),
			StopReason: llm.EndTurn,
			Usage:      llm.Usage{InputTokens: 12, OutputTokens: 10, CacheReadTokens: 1024, CacheWriteTokens: 30},
		}},
		{name: "parallel tool calls", resp: llm.Response{
			Message:    assistant(append([]message.Part{message.Text("Checking both, and the time.")}, uses...)...),
			StopReason: llm.ToolUse,
			Usage:      llm.Usage{InputTokens: 90, OutputTokens: 60},
		}, req: &llm.Request{Messages: hi, Tools: []llm.ToolSpec{weatherTool, timeTool}}},
		{name: "thinking", skip: !h.Caps.Thinking, resp: llm.Response{
			Message: assistant(
				message.Thinking("The user wants the weather in Paris: call get_weather.", "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"),
				uses[0],
			),
			StopReason: llm.ToolUse,
			Usage:      llm.Usage{InputTokens: 120, OutputTokens: 70},
		}, req: &llm.Request{Messages: hi, Tools: []llm.ToolSpec{weatherTool}}},
		{name: "structured", resp: llm.Response{
			Message:    assistant(structured(h, `{"verdict":"approve"}`)),
			StopReason: llm.EndTurn,
			Usage:      llm.Usage{InputTokens: 30, OutputTokens: 9},
		}, req: &llm.Request{Messages: hi, Output: &llm.OutputSpec{Name: "decision", Schema: schema}}},
		{name: "max tokens", resp: llm.Response{
			Message:    assistant(message.Text("Once upon a time, in a land far")),
			StopReason: llm.MaxTokens,
			Usage:      llm.Usage{InputTokens: 10, OutputTokens: 10},
		}},
		{name: "refusal", resp: llm.Response{
			Message:    assistant(message.Text("I can't help with that.")),
			StopReason: llm.Refusal,
			Usage:      llm.Usage{InputTokens: 10, OutputTokens: 7},
		}},
	}
	for _, tt := range tests {
		if tt.skip {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			if req == nil {
				req = &llm.Request{Messages: hi}
			}
			f := h.New(t, Reply{Response: tt.resp}, Reply{Response: tt.resp})
			generated := generate(t, f, req)
			streamed := StreamReply(t, streamer(f), req)
			diff(t, "streamed reply against the generated one", generated, streamed)
			diff(t, "streamed reply", &tt.resp, streamed)
			require.Equal(t, 2, f.Calls())
		})
	}
}

// structured is the part a structured reply of text comes back as.
func structured(h Harness, text string) message.Part {
	if h.Caps.Structured {
		return message.Structured(json.RawMessage(text), text)
	}
	return message.Text(text)
}

func testStreamProviderError(t *testing.T, h Harness) {
	f := h.New(t, Reply{Status: 429})
	err := StreamError(t, context.Background(), streamer(f), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
	providerError(t, h, err, 429)
	require.Equal(t, 1, f.Calls())
}

// faulty returns a fake whose one reply streams the first words of a text
// and then fails with fault.
func faulty(t *testing.T, h Harness, fault Fault) (Fake, error) {
	t.Helper()
	f := h.New(t, Reply{Fault: fault, Response: llm.Response{
		Message:    assistant(message.Text("Hello! How can I help you today?")),
		StopReason: llm.EndTurn,
		Usage:      llm.Usage{InputTokens: 12, OutputTokens: 10},
	}})
	err := StreamError(t, context.Background(), streamer(f), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
	require.True(t, strings.HasPrefix(err.Error(), h.Name+": "), "error %q does not name the provider %s", err, h.Name)
	return f, err
}

func testStreamErrorMidStream(t *testing.T, h Harness) {
	_, err := faulty(t, h, FaultError)
	require.False(t, errors.Is(err, llm.ErrIncompleteStream), "a provider error is not a cut: %v", err)
}

func testStreamCutShort(t *testing.T, h Harness) {
	_, err := faulty(t, h, FaultEOF)
	require.ErrorIs(t, err, llm.ErrIncompleteStream)
}

func testStreamInvalidRequest(t *testing.T, h Harness) {
	hi := &llm.Request{Messages: []message.Message{message.UserText("Hi")}}
	unpaired := &llm.Request{Messages: []message.Message{
		message.UserText("Refund order 42"),
		assistant(message.ToolUse("use_unanswered", "refund", json.RawMessage(`{"order_id":42}`))),
	}}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		req  *llm.Request
		want error
	}{
		{"nil", context.Background(), nil, llm.ErrNilRequest},
		{"unpaired", context.Background(), unpaired, llm.ErrMalformedHistory},
		{"canceled", canceled, hi, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := h.New(t)
			err := StreamError(t, tt.ctx, streamer(f), tt.req)
			require.ErrorIs(t, err, tt.want)
			require.Zero(t, f.Calls(), "the request reached the provider")
		})
	}
}

// testStreamBreak: a caller that stops reading ends the call, and the model
// goes on working.
func testStreamBreak(t *testing.T, h Harness) {
	r := answer("Hello there, nice to meet you!")
	f := h.New(t, r, r)
	req := &llm.Request{Messages: []message.Message{message.UserText("Hi")}}
	for c, err := range streamer(f).Stream(context.Background(), req) {
		require.NoError(t, err)
		require.Equal(t, llm.ChunkText, c.Kind)
		break
	}
	resp := StreamReply(t, streamer(f), req)
	diff(t, "reply after a break", &r.Response, resp)
	require.Equal(t, 2, f.Calls())
}
