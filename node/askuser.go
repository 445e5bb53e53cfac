package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/markov-agents/markov/instance"
)

// AskUserTool is the default name of the tool AskUser builds.
const AskUserTool = "ask_user"

// The kinds of question AskUser's tool asks (AskInput.Kind).
const (
	// AskText asks for free text: a non-empty string.
	AskText = "text"
	// AskConfirm asks yes or no: a boolean.
	AskConfirm = "confirm"
	// AskChoice asks for one of AskInput.Options: that string.
	AskChoice = "choice"
	// AskForm asks for an object that AskInput.Schema describes.
	AskForm = "form"
)

// MaxAskOptions is the largest number of options a choice may offer.
const MaxAskOptions = 50

// AskUserConfig configures the tool AskUser builds. The zero value is
// usable: the tool "ask_user", with no deadline.
type AskUserConfig struct {
	// Name is the tool's name (AskUserTool if empty).
	Name string
	// Description is what the model is told of the tool (a default that
	// explains the kinds if empty).
	Description string
	// Timeout, when positive, is how long the person has to answer. At
	// the deadline the call resolves with a text saying that nobody
	// answered and what was asked (instance.OnTimeoutSummary), so the
	// model can go on without the answer; with FailOnTimeout it fails
	// instead (an error result).
	Timeout       time.Duration
	FailOnTimeout bool
}

// AskInput is what the model passes the ask-user tool.
type AskInput struct {
	Question string `json:"question" jsonschema:"the question for the person, as they will read it"`
	Kind     string `json:"kind,omitempty" jsonschema:"text (the default: free text), confirm (yes or no), choice (one of options), form (an object described by schema)"`
	// Options are the choices of a choice question.
	Options []string `json:"options,omitempty" jsonschema:"for choice: the answers the person picks one of"`
	// Schema describes a form's answer: a JSON Schema of type object.
	Schema map[string]any `json:"schema,omitempty" jsonschema:"for form: a JSON Schema of type object describing the fields to fill in"`
}

// AskMetadata is the metadata of an ask-user suspension, for a UI to
// render the question.
type AskMetadata struct {
	Question string   `json:"question"`
	Kind     string   `json:"kind"`
	Options  []string `json:"options,omitempty"`
}

// AskUser returns the ready ask-user tool: the model asks the person a
// question — free text, yes or no, a choice among options, or a small
// form it describes with a JSON Schema — and the call suspends with a
// payload schema built from the question (instance.WithPayloadSchema)
// and the question as its reason and metadata (AskMetadata). The
// person's answer, validated against that schema (a bad one is refused
// and the call stays pending), is the tool's result: the text as is, true
// or false, the option, the form as JSON. It surfaces wherever
// suspensions do: Pending, the HTTP API, the console's typed form, the
// CLI, ACP. A node offers it by listing it among its tools.
func AskUser[S any](cfg AskUserConfig) Tool[S] {
	name, desc := cfg.Name, cfg.Description
	if name == "" {
		name = AskUserTool
	}
	if desc == "" {
		desc = "Ask the person a question and wait for the answer, which may take hours. " +
			"kind: text (free text, the default), confirm (yes or no), choice (one of options), " +
			"form (fields described by a JSON Schema of type object in schema)."
	}
	return NewTool(name, desc, func(ctx *ToolContext[S], in AskInput) (string, error) {
		kind, schema, err := askSchema(in)
		if err != nil {
			return "", err
		}
		opts := []instance.SuspendOption{
			instance.WithPayloadSchema(schema),
			instance.WithMetadata(AskMetadata{Question: in.Question, Kind: kind, Options: in.Options}),
		}
		if cfg.Timeout > 0 {
			opts = append(opts, instance.WithTimeout(cfg.Timeout), instance.OnTimeoutSummary())
			if cfg.FailOnTimeout {
				opts = append(opts, instance.OnTimeoutFail())
			}
		}
		return "", ctx.Suspend(in.Question, opts...)
	})
}

// askSchema returns the kind of question in asks and the JSON Schema its
// answer must match, or why the question cannot be asked.
func askSchema(in AskInput) (string, json.RawMessage, error) {
	if in.Question == "" {
		return "", nil, errors.New("question is empty")
	}
	var schema any
	switch in.Kind {
	case "", AskText:
		in.Kind, schema = AskText, map[string]any{"type": "string", "minLength": 1}
	case AskConfirm:
		schema = map[string]any{"type": "boolean"}
	case AskChoice:
		if len(in.Options) < 2 || len(in.Options) > MaxAskOptions {
			return "", nil, fmt.Errorf("a choice needs 2 to %d options, not %d", MaxAskOptions, len(in.Options))
		}
		if slices.Contains(in.Options, "") || len(slices.Compact(slices.Sorted(slices.Values(in.Options)))) != len(in.Options) {
			return "", nil, errors.New("options must be distinct and not empty")
		}
		schema = map[string]any{"type": "string", "enum": in.Options}
	case AskForm:
		if in.Schema["type"] != "object" {
			return "", nil, errors.New(`a form's schema must be a JSON Schema of "type": "object"`)
		}
		schema = in.Schema
	default:
		return "", nil, fmt.Errorf("unknown kind %q: want text, confirm, choice or form", in.Kind)
	}
	raw, err := json.Marshal(schema)
	return in.Kind, raw, err
}
