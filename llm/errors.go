package llm

import "errors"

// ErrMalformedHistory reports a transcript a provider cannot send: a tool use
// without a matching result, a result without its use, or an unknown role.
var ErrMalformedHistory = errors.New("llm: malformed history")

// ErrNilRequest reports a nil *Request given to a Model.
var ErrNilRequest = errors.New("llm: nil request")

// ErrInvalidSpec reports a tool or output spec no provider takes: a tool
// without a name, or a schema that is not a JSON object.
var ErrInvalidSpec = errors.New("llm: invalid tool or output spec")

// ErrIncompleteStream reports a streamed reply that ended before it was
// complete: without its end chunk, or, from a provider, without the
// stream's terminal event. Its chunks are a partial reply.
var ErrIncompleteStream = errors.New("llm: stream ended before the reply was complete")

// ErrInvalidChunk reports a chunk that cannot follow the chunks before it
// in a streamed reply (see [Accumulator.Add]).
var ErrInvalidChunk = errors.New("llm: invalid chunk")

// ErrInvalidConfig reports a provider adapter's Config that cannot work: a
// negative MaxRetries or default MaxTokens.
var ErrInvalidConfig = errors.New("llm: invalid model config")
