package llm_test

import (
	"context"
	"fmt"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/message"
)

func ExampleStream() {
	// Any model streams: one that implements llm.Streamer (the scripted
	// model here, in chunks of six runes) through its own Stream, any other
	// as one chunk per block. The accumulator shows the reply as it grows,
	// and its Response is the reply Generate returns.
	model := scripted.New(scripted.Text("The parcel left Lyon today.")).Configure(scripted.Config{ChunkSize: 6})
	req := &llm.Request{Messages: []message.Message{message.UserText("Where is my parcel?")}}
	var acc llm.Accumulator
	for chunk, err := range llm.Stream(context.Background(), model, req) {
		if err != nil {
			fmt.Println("error:", err) // the chunks so far are not a reply
			return
		}
		if err := acc.Add(chunk); err != nil {
			fmt.Println("error:", err)
			return
		}
		if chunk.Kind == llm.ChunkText {
			fmt.Printf("%q\n", acc.Message().Text())
		}
	}
	resp, err := acc.Response()
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(resp.StopReason, resp.Message.Text())
	// Output:
	// "The pa"
	// "The parcel l"
	// "The parcel left Ly"
	// "The parcel left Lyon tod"
	// "The parcel left Lyon today."
	// end_turn The parcel left Lyon today.
}
