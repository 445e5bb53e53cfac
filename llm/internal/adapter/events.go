package adapter

import "github.com/markov-agents/markov/llm"

// Events is a stream of server-sent events as the SDKs decode them (their
// ssestream.Stream[E], generated from one template).
type Events[E any] interface {
	Next() bool
	Current() E
	Err() error
	Close() error
}

// Drain yields the chunks of events as they arrive, then the [llm.ChunkEnd]
// chunk with the reply, and returns the error that ends the stream, if any
// (nil too when the caller stopped); it closes events. add takes in one
// event and returns the chunks it carries (the slice may be reused by the
// next call); an error from it ends the stream. Once the events have ended
// without an error, end returns the reply, or the error of a stream that
// ended before the reply was complete.
func Drain[E any](events Events[E], add func(E) ([]llm.Chunk, error), end func() (*llm.Response, error), yield func(llm.Chunk, error) bool) error {
	defer events.Close()
	for events.Next() {
		chunks, err := add(events.Current())
		if err != nil {
			return err
		}
		for _, c := range chunks {
			if !yield(c, nil) {
				return nil
			}
		}
	}
	if err := events.Err(); err != nil {
		return err
	}
	resp, err := end()
	if err != nil {
		return err
	}
	yield(llm.Chunk{Kind: llm.ChunkEnd, Response: resp}, nil)
	return nil
}
