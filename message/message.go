// Package message defines the conversation model shared by every layer of
// markov: messages, their parts (text, tool use, tool result, thinking with
// signature, structured output, instance records) and where they came from.
//
// Messages are plain data. Nothing in this package imports the rest of the
// library; providers, the executor and the persisted format all speak it.
package message

import "encoding/json"

// Role says who speaks a message.
type Role string

// The roles a message can have.
const (
	// User is input from the person or system driving the machine, and
	// content handed to a parent by a ceding child.
	User Role = "user"
	// Assistant is a model reply.
	Assistant Role = "assistant"
	// Tool carries tool results answering the tool uses of the assistant
	// message before it. Providers map it to their own shape (a user message
	// of tool_result blocks, or tool messages).
	Tool Role = "tool"
	// Record is an instance record: a note of something the machine did
	// outside a model turn (a command and its effects). Records are kept in
	// history for audit and are never sent to a model.
	Record Role = "record"
)

// Kind says what a Part holds.
type Kind uint8

// The kinds of part.
const (
	// KindText is plain text in Text.
	KindText Kind = iota + 1
	// KindToolUse is a tool call: ID, Name and JSON input in Data.
	KindToolUse
	// KindToolResult answers the tool use with the same ID: Text is the
	// content, IsError marks a failure the model should see.
	KindToolResult
	// KindThinking is model reasoning in Text with the provider's Signature,
	// replayed unchanged on the next request.
	KindThinking
	// KindStructured is structured output: JSON in Data (and the raw text in
	// Text).
	KindStructured
	// KindRecord is an instance record: Name says what happened, Data holds
	// its JSON details.
	KindRecord
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case KindText:
		return "text"
	case KindToolUse:
		return "tool_use"
	case KindToolResult:
		return "tool_result"
	case KindThinking:
		return "thinking"
	case KindStructured:
		return "structured"
	case KindRecord:
		return "record"
	}
	return "unknown"
}

// Part is one block of a message. Which fields are used depends on Kind; the
// constructors below set them consistently.
type Part struct {
	Kind Kind
	// Text is the text of a text, thinking or tool result part.
	Text string
	// ID is the tool-use ID of a tool use or tool result.
	ID string
	// Name is the tool name of a tool use, or the record name.
	Name string
	// Data is the JSON input of a tool use, the value of structured output or
	// the details of a record.
	Data json.RawMessage
	// IsError marks a tool result as a failure; on a user text part, it
	// marks the error a whole-instance suspension was resolved with
	// (machine.ResumeInput.IsError), which is not something the user said.
	IsError bool
	// Signature is the provider's signature of a thinking block. A thinking
	// part with an empty Text and a Signature is a redacted block.
	Signature string
	// SuspendID names the suspension a tool result or record resolved, if
	// any: the audit trail of a resume.
	SuspendID string
}

// Text returns a text part.
func Text(s string) Part { return Part{Kind: KindText, Text: s} }

// ToolUse returns a tool-use part.
func ToolUse(id, name string, input json.RawMessage) Part {
	return Part{Kind: KindToolUse, ID: id, Name: name, Data: input}
}

// ToolResult returns a tool-result part answering the tool use id.
func ToolResult(id, content string, isError bool) Part {
	return Part{Kind: KindToolResult, ID: id, Text: content, IsError: isError}
}

// Thinking returns a thinking part with its provider signature.
func Thinking(text, signature string) Part {
	return Part{Kind: KindThinking, Text: text, Signature: signature}
}

// Structured returns a structured-output part holding data and the text it
// was parsed from.
func Structured(data json.RawMessage, text string) Part {
	return Part{Kind: KindStructured, Data: data, Text: text}
}

// RecordPart returns an instance-record part.
func RecordPart(name string, data json.RawMessage) Part {
	return Part{Kind: KindRecord, Name: name, Data: data}
}

// Source says where a message came from and who may see it.
type Source struct {
	// InstanceID is the instance that produced the message; empty for input
	// from outside the machine.
	InstanceID string
	// Node is the node name of that instance when it produced the message.
	Node string
	// To scopes the message to one instance: only that instance's transcript
	// holds it. Empty means the shared conversation every leaf sees.
	To string
}

// Message is one entry of a machine's history.
type Message struct {
	Role   Role
	Parts  []Part
	Source Source
	// Silent user input is kept in history without waking the model.
	Silent bool
}

// UserText returns a user message with one text part.
func UserText(s string) Message {
	return Message{Role: User, Parts: []Part{Text(s)}}
}

// Text returns the concatenated text parts of m.
func (m Message) Text() string {
	var s string
	for i := range m.Parts {
		if m.Parts[i].Kind == KindText {
			s += m.Parts[i].Text
		}
	}
	return s
}

// ToolUses returns the tool-use parts of m in order.
func (m Message) ToolUses() []Part {
	var out []Part
	for _, p := range m.Parts {
		if p.Kind == KindToolUse {
			out = append(out, p)
		}
	}
	return out
}

// VisibleTo reports whether the message belongs in the transcript of the
// instance id: shared messages and those scoped to id, never records.
func (m *Message) VisibleTo(id string) bool {
	return m.Role != Record && (m.Source.To == "" || m.Source.To == id)
}

// Clone returns a deep copy of m.
func (m Message) Clone() Message {
	if m.Parts == nil {
		return m
	}
	parts := make([]Part, len(m.Parts))
	copy(parts, m.Parts)
	for i := range parts {
		if parts[i].Data != nil {
			parts[i].Data = append(json.RawMessage(nil), parts[i].Data...)
		}
	}
	m.Parts = parts
	return m
}

// CloneAll returns a deep copy of msgs, as Clone copies each: the copies'
// parts come from one array and their bytes from another (each copy's
// slices capped, so appending to one never reaches the next), so a step's
// messages cost three allocations, not two or three each.
func CloneAll(msgs []Message) []Message {
	if msgs == nil {
		return nil
	}
	var parts []Part
	var data []byte
	if nparts, nbytes, some := cloneSize(msgs); some {
		parts = make([]Part, nparts)
		if nbytes > 0 {
			data = make([]byte, 0, nbytes)
		}
	}
	out := make([]Message, len(msgs))
	for i := range msgs {
		out[i] = msgs[i]
		if msgs[i].Parts == nil {
			continue
		}
		n := len(msgs[i].Parts)
		p := parts[:n:n]
		parts = parts[n:]
		copy(p, msgs[i].Parts)
		for j := range p {
			if d := p[j].Data; d != nil {
				start := len(data)
				data = append(data, d...)
				p[j].Data = nilIfEmpty(data[start:len(data):len(data)])
			}
		}
		out[i].Parts = p
	}
	return out
}

// cloneSize returns how many parts and data bytes msgs hold, and whether
// any of them has parts (an empty list counts).
func cloneSize(msgs []Message) (nparts, nbytes int, some bool) {
	for i := range msgs {
		if msgs[i].Parts == nil {
			continue
		}
		some = true
		nparts += len(msgs[i].Parts)
		for j := range msgs[i].Parts {
			nbytes += len(msgs[i].Parts[j].Data)
		}
	}
	return nparts, nbytes, some
}

// nilIfEmpty returns nil for empty data, as Clone's copy of it is.
func nilIfEmpty(d json.RawMessage) json.RawMessage {
	if len(d) == 0 {
		return nil
	}
	return d
}
