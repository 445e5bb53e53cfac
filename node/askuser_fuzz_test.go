package node

import (
	"encoding/json"
	"testing"

	"github.com/markov-agents/markov/internal/frame"
)

// FuzzAskSchema: whatever the model asks, askSchema either refuses it or
// returns a schema that is JSON; a schema it returns for a form or a
// choice either compiles or fails the call (never a panic).
func FuzzAskSchema(f *testing.F) {
	f.Add("Which size?", "choice", `["S","M"]`, `{}`)
	f.Add("Where?", "form", `[]`, `{"type":"object","properties":{"city":{"type":"string"}}}`)
	f.Add("", "", `null`, `null`)
	f.Add("?", "form", `[]`, `{"type":"object","properties":7}`)
	f.Fuzz(func(t *testing.T, question, kind, options, schema string) {
		in := AskInput{Question: question, Kind: kind}
		_ = json.Unmarshal([]byte(options), &in.Options)
		_ = json.Unmarshal([]byte(schema), &in.Schema)
		k, raw, err := askSchema(in)
		if err != nil {
			return
		}
		if k == "" || !json.Valid(raw) {
			t.Fatalf("kind %q, schema %s", k, raw)
		}
		if s, err := frame.ParseSchema(raw); err == nil {
			_ = s.Validate(json.RawMessage(`"x"`))
		}
	})
}
