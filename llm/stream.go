package llm

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"unicode/utf8"

	"github.com/markov-agents/markov/message"
)

// Streamer is a model that streams its reply: an optional interface beside
// [Model], implemented by the provider adapters and the scripted model.
// Use [Stream] to stream from any Model, and [Collect] or an [Accumulator]
// to turn the chunks into the [Response] that Generate returns.
//
// Each range over the sequence Stream returns makes one model call, and
// must follow these rules:
//
//   - Chunks come in order: a block's chunks carry its Index, blocks are
//     numbered 0, 1, 2, … in the order they start, which is the order of
//     their parts in the reply's message (chunks of blocks already started
//     may interleave).
//   - A complete reply ends with exactly one [ChunkEnd], whose Response is
//     the reply as Generate returns it for the same request and provider
//     answer: same message, stop reason and usage.
//   - An error (a refused request, a provider error before or during the
//     stream, a cut connection, a stream that ends without its terminal
//     event) is yielded once as (Chunk{}, err), and the sequence ends. The
//     chunks before it are a partial reply: never treat them as complete.
//     A stream that ends without ChunkEnd and without an error is
//     incomplete too ([ErrIncompleteStream] from [Collect] and
//     [Accumulator.Response]).
//   - Breaking out of the loop ends the call and releases its connection.
//
// Like Generate, Stream must be safe for concurrent use and must not modify
// the request.
type Streamer interface {
	Stream(ctx context.Context, req *Request) iter.Seq2[Chunk, error]
}

// ChunkKind says what a [Chunk] carries.
type ChunkKind uint8

// The kinds of chunk.
const (
	// ChunkText: Text is the next piece of the text block at Index (a
	// [message.KindText] part, or [message.KindStructured] when the reply
	// is structured output).
	ChunkText ChunkKind = iota + 1
	// ChunkThinking: Text is the next piece of the thinking block at
	// Index, and Signature the next piece of its signature (a redacted
	// block carries the provider's opaque data in Signature and no Text).
	ChunkThinking
	// ChunkToolUse: a tool use starts at Index, with its ID and Name.
	ChunkToolUse
	// ChunkToolInput: Text is the next piece of the JSON input of the tool
	// use at Index.
	ChunkToolInput
	// ChunkEnd is the last chunk of a complete reply: Response is the
	// assembled reply, with its stop reason and usage.
	ChunkEnd
)

// String returns the kind's name.
func (k ChunkKind) String() string {
	switch k {
	case ChunkText:
		return "text"
	case ChunkThinking:
		return "thinking"
	case ChunkToolUse:
		return "tool_use"
	case ChunkToolInput:
		return "tool_input"
	case ChunkEnd:
		return "end"
	}
	return fmt.Sprintf("ChunkKind(%d)", uint8(k))
}

// Chunk is one piece of a streamed reply. Which fields are set depends on
// Kind.
type Chunk struct {
	Kind ChunkKind
	// Index is the block the chunk belongs to: the index of its part in
	// the reply's message.
	Index int
	// Text is a piece of text, thinking, or tool input JSON.
	Text string
	// Signature is a piece of a thinking block's signature.
	Signature string
	// ID and Name identify the tool use a ChunkToolUse starts.
	ID, Name string
	// Response is the assembled reply, on the ChunkEnd only.
	Response *Response
}

// Stream streams m's reply to req: through m's own Stream when m is a
// [Streamer], and otherwise by calling Generate and yielding the reply as
// one chunk per content block (two for a tool use: its start and its
// input) and the [ChunkEnd]. Nothing is started until the sequence is
// ranged over.
func Stream(ctx context.Context, m Model, req *Request) iter.Seq2[Chunk, error] {
	if s, ok := m.(Streamer); ok {
		return s.Stream(ctx, req)
	}
	return generated{m}.Stream(ctx, req)
}

// AsStreamer returns m as a [Streamer]: m itself when it streams, and
// otherwise a Streamer whose Stream calls Generate (see [Stream]).
func AsStreamer(m Model) Streamer {
	if s, ok := m.(Streamer); ok {
		return s
	}
	return generated{m}
}

// generated streams a model that does not stream.
type generated struct{ m Model }

func (g generated) Stream(ctx context.Context, req *Request) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		resp, err := g.m.Generate(ctx, req)
		if err == nil && resp == nil {
			err = fmt.Errorf("%w: the model returned no reply and no error", ErrIncompleteStream)
		}
		if err != nil {
			yield(Chunk{}, err)
			return
		}
		for c := range ResponseChunks(resp, 0) {
			if !yield(c, nil) {
				return
			}
		}
	}
}

// ResponseChunks returns the chunks that stream resp: for each part of its
// message in order, text and structured parts as [ChunkText], thinking as
// [ChunkThinking] (the signature on the last one), tool uses as a
// [ChunkToolUse] and their input as [ChunkToolInput]; then the [ChunkEnd]
// carrying resp. Every text, thinking and input is cut into pieces of at
// most size runes; size zero (or less) sends each whole. Parts of other
// kinds are not streamed (a reply holds none). Models that hold a whole
// reply stream it with ResponseChunks.
func ResponseChunks(resp *Response, size int) iter.Seq[Chunk] {
	return func(yield func(Chunk) bool) {
		index := 0
		for _, p := range resp.Message.Parts {
			if !partChunks(p, index, size, yield) {
				return
			}
			switch p.Kind {
			case message.KindText, message.KindStructured, message.KindThinking, message.KindToolUse:
				index++
			}
		}
		yield(Chunk{Kind: ChunkEnd, Response: resp})
	}
}

// partChunks yields the chunks of p as block index; false when yield asked
// to stop.
func partChunks(p message.Part, index, size int, yield func(Chunk) bool) bool {
	c := Chunk{Index: index}
	text := p.Text
	switch p.Kind {
	case message.KindText, message.KindStructured:
		c.Kind = ChunkText
		if text == "" {
			text = string(p.Data) // structured output without its text
		}
	case message.KindThinking:
		c.Kind = ChunkThinking
	case message.KindToolUse:
		if !yield(Chunk{Kind: ChunkToolUse, Index: index, ID: p.ID, Name: p.Name}) {
			return false
		}
		if len(p.Data) == 0 {
			return true
		}
		c.Kind, text = ChunkToolInput, string(p.Data)
	default:
		return true
	}
	for piece, last := range pieces(text, size) {
		c.Text = piece
		if last && c.Kind == ChunkThinking {
			c.Signature = p.Signature
		}
		if !yield(c) {
			return false
		}
	}
	return true
}

// pieces cuts s into pieces of at most size runes (all of s when size is
// not positive), reporting the last; an empty s is one empty piece.
func pieces(s string, size int) iter.Seq2[string, bool] {
	return func(yield func(string, bool) bool) {
		if size <= 0 || s == "" {
			yield(s, true)
			return
		}
		for s != "" {
			n, i := 0, 0
			for i < len(s) && n < size {
				_, w := utf8.DecodeRuneInString(s[i:])
				i += w
				n++
			}
			if !yield(s[:i], i == len(s)) {
				return
			}
			s = s[i:]
		}
	}
}

// Collect ranges over a streamed reply and returns the Response of its
// [ChunkEnd]. It returns the first error the stream yields, an
// [ErrInvalidChunk] error for chunks out of order, and
// [ErrIncompleteStream] when the stream ends without a ChunkEnd: a partial
// reply is never returned as a complete one.
func Collect(stream iter.Seq2[Chunk, error]) (*Response, error) {
	var acc Accumulator
	for c, err := range stream {
		if err != nil {
			return nil, err
		}
		if err := acc.Add(c); err != nil {
			return nil, err
		}
	}
	return acc.Response()
}

// Accumulator assembles a streamed reply chunk by chunk: [Accumulator.Message]
// is the reply so far (for showing it as it arrives), and
// [Accumulator.Response] the complete reply once the [ChunkEnd] has come.
// The zero value is ready to use; an Accumulator is not safe for concurrent
// use.
type Accumulator struct {
	blocks []block
	resp   *Response
}

// block is one content block being assembled.
type block struct {
	kind      message.Kind
	id, name  string
	text, sig strings.Builder
}

// Add adds the next chunk. It returns an error wrapping [ErrInvalidChunk],
// and adds nothing, for a chunk that cannot follow the ones before it: of
// an unknown kind, after the end, for a block that has not started (its
// Index beyond the next block's), of another kind than its block, a second
// start of a tool use, or an end without a Response.
func (a *Accumulator) Add(c Chunk) error {
	if a.resp != nil {
		return fmt.Errorf("%w: %s chunk after the end", ErrInvalidChunk, c.Kind)
	}
	if c.Kind == ChunkEnd {
		if c.Response == nil {
			return fmt.Errorf("%w: end without a response", ErrInvalidChunk)
		}
		a.resp = c.Response
		return nil
	}
	kind, ok := chunkPart(c.Kind)
	if !ok {
		return fmt.Errorf("%w: unknown kind %d", ErrInvalidChunk, uint8(c.Kind))
	}
	if c.Index < 0 || c.Index > len(a.blocks) {
		return fmt.Errorf("%w: %s chunk for block %d, but %d blocks have started", ErrInvalidChunk, c.Kind, c.Index, len(a.blocks))
	}
	if c.Index == len(a.blocks) {
		if c.Kind == ChunkToolInput {
			return fmt.Errorf("%w: tool input for block %d before its tool use", ErrInvalidChunk, c.Index)
		}
		a.blocks = append(a.blocks, block{kind: kind, id: c.ID, name: c.Name})
	} else if b := &a.blocks[c.Index]; b.kind != kind || c.Kind == ChunkToolUse {
		return fmt.Errorf("%w: %s chunk for %s block %d", ErrInvalidChunk, c.Kind, b.kind, c.Index)
	}
	b := &a.blocks[c.Index]
	b.text.WriteString(c.Text)
	b.sig.WriteString(c.Signature)
	return nil
}

// chunkPart returns the kind of part a chunk of kind k builds.
func chunkPart(k ChunkKind) (message.Kind, bool) {
	switch k {
	case ChunkText:
		return message.KindText, true
	case ChunkThinking:
		return message.KindThinking, true
	case ChunkToolUse, ChunkToolInput:
		return message.KindToolUse, true
	}
	return 0, false
}

// Message returns the reply as assembled from the chunks so far: an
// assistant message with a text part per text block (structured output
// too: whether it is JSON is known at the end), a thinking part per
// thinking block, and a tool use per tool block whose Data is the input
// received so far, as sent (incomplete JSON until the block is done). The
// message is the caller's; the complete reply is [Accumulator.Response].
func (a *Accumulator) Message() message.Message {
	msg := message.Message{Role: message.Assistant, Parts: make([]message.Part, len(a.blocks))}
	for i := range a.blocks {
		b := &a.blocks[i]
		switch b.kind {
		case message.KindThinking:
			msg.Parts[i] = message.Thinking(b.text.String(), b.sig.String())
		case message.KindToolUse:
			msg.Parts[i] = message.ToolUse(b.id, b.name, []byte(b.text.String()))
		default:
			msg.Parts[i] = message.Text(b.text.String())
		}
	}
	return msg
}

// Response returns the complete reply carried by the [ChunkEnd], or an
// error wrapping [ErrIncompleteStream] when it has not come.
func (a *Accumulator) Response() (*Response, error) {
	if a.resp == nil {
		return nil, fmt.Errorf("%w: no end chunk after %d blocks", ErrIncompleteStream, len(a.blocks))
	}
	return a.resp, nil
}
