package resumehttp

import (
	"encoding/json"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/store"
)

// ResumeRequest is the body of POST /suspensions/{id}/resume.
type ResumeRequest struct {
	// Payload is the result, any JSON value. A JSON string is the tool
	// result text as is; anything else reaches the machine as JSON.
	// Omitted, the suspension resolves without a payload.
	Payload json.RawMessage `json:"payload,omitempty"`
	// IsError marks the result as a failure the model sees.
	IsError bool `json:"is_error,omitempty"`
	// ContinueTranscript false resumes in a fresh turn: the resumed
	// instance sees a digest of its earlier transcript instead of the
	// whole of it (machine.ResumeInput.FreshTurn; the ACP draft RFC's
	// continueTranscript). Omitted or true, the transcript continues.
	ContinueTranscript *bool `json:"continue_transcript,omitempty"`
	// By and Groups are the deciding identity: its subject and the groups
	// or roles it holds (machine.ResumeInput.By, Groups). They are part of
	// the signed body, so whoever holds the secret vouches for them. A
	// governed suspension (instance.WithPolicy) refuses a decision its
	// policy does not allow: 403 forbidden.
	By     string   `json:"by,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// Digest is the suspension's digest the decider saw (Suspension's
	// digest): required by a governed suspension, checked whenever given;
	// another is 409 stale_decision.
	Digest string `json:"digest,omitempty"`
	// Deny marks the decision a refusal, for the policy's quorum.
	Deny bool `json:"deny,omitempty"`
	// Edit is the call's input as the decider edited it, any JSON value
	// (machine.ResumeInput.Edit), in the signed body: only where the
	// suspension's policy allows edits (403 forbidden otherwise), checked
	// against the tool's input schema (400 invalid_input naming the
	// field), and nothing changes when it is refused.
	Edit json.RawMessage `json:"edit,omitempty"`
}

// CancelRequest is the optional body of DELETE /suspensions/{id}.
type CancelRequest struct {
	// Reason completes the call's error result, "cancelled: Reason".
	Reason string `json:"reason,omitempty"`
	// By and Groups are who cancels (machine.CancelInput): a governed
	// suspension refuses a person its policy does not allow, 403
	// forbidden. Omitted, the cancellation is the service's own.
	By     string   `json:"by,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// InvokeRequest is the body of POST /machines/{id}/commands/{name}.
type InvokeRequest struct {
	// Input is the command input, any JSON value checked against the
	// command's input schema. Omitted, it is the empty object.
	Input json.RawMessage `json:"input,omitempty"`
	// InstanceID targets an instance; empty means the primary leaf.
	InstanceID string `json:"instance_id,omitempty"`
	// RequestID is ignored by the handler; it tells two otherwise
	// identical invocations apart, which would be refused as a replay.
	RequestID string `json:"request_id,omitempty"`
}

// Summary is the answer of a resume, a cancellation or a command: what the
// run they started did, up to its end.
type Summary struct {
	// MachineID is the machine that ran.
	MachineID string `json:"machine_id"`
	// Steps are the reasons of the run's steps, in order ("command",
	// "tool_use", "end_turn", "suspend", "awaiting_resume", …).
	Steps []string `json:"steps"`
	// Done reports that the run ended (its last step was Done).
	Done bool `json:"done"`
	// Pending are the suspend IDs of the machine still waiting for a
	// result after the run.
	Pending []string `json:"pending"`
	// Text is the last assistant text of the run, if any.
	Text string `json:"text,omitempty"`
	// Command is the result of the command the run executed (an invoked
	// command, or a suspended command the resume completed).
	Command *CommandResult `json:"command,omitempty"`
}

// CommandResult is a command's outcome in a Summary.
type CommandResult struct {
	// Name is the command name.
	Name string `json:"name"`
	// InstanceID is the instance the command ran on.
	InstanceID string `json:"instance_id"`
	// Value is the command's result as JSON; absent when it suspended.
	Value json.RawMessage `json:"value,omitempty"`
	// SuspendID is set when the command suspended: resume it with this ID.
	SuspendID string `json:"suspend_id,omitempty"`
}

// Suspension is an entry of the pending-suspension index as the endpoints
// return it.
type Suspension struct {
	// ID is the suspend ID.
	ID string `json:"id"`
	// MachineID is the machine waiting for the result.
	MachineID string `json:"machine_id"`
	// Status is "pending", or what became of the suspension: "resolved",
	// "expired" or "cancelled" (store.Statuses).
	Status string `json:"status"`
	// Kind is "tool", "command" or "instance".
	Kind string `json:"kind,omitempty"`
	// Name is the tool or command name.
	Name string `json:"name,omitempty"`
	// Reason is what the suspension waits for, as given to Suspend.
	Reason string `json:"reason,omitempty"`
	// Deadline is when the suspension times out; absent if never.
	Deadline time.Time `json:"deadline,omitzero"`
	// CreatedAt is when the call suspended.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// PayloadSchema is the JSON Schema a resume payload must satisfy, when
	// the tool or command declared one; GET /suspensions/{id} of a
	// pending suspension only.
	PayloadSchema json.RawMessage `json:"payload_schema,omitempty"`
	// Digest identifies what a decision decides (instance.CallDigest); a
	// resume names it. Policy is the suspension's policy and Decisions
	// those recorded so far, when it is governed. GET /suspensions/{id}
	// of a pending suspension only.
	Digest    string              `json:"digest,omitempty"`
	Policy    *instance.Policy    `json:"policy,omitempty"`
	Decisions []instance.Decision `json:"decisions,omitempty"`
}

// SuspensionList is the answer of GET /suspensions, earliest deadline
// first.
type SuspensionList struct {
	Suspensions []Suspension `json:"suspensions"`
}

// CommandList is the answer of GET /machines/{id}/commands: every
// instance's commands with their input schemas, tree order.
type CommandList struct {
	MachineID string                `json:"machine_id"`
	Commands  []durable.CommandInfo `json:"commands"`
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	// Error says what went wrong, for humans.
	Error string `json:"error"`
	// Code says what went wrong, for programs (see the package
	// documentation for the list).
	Code string `json:"code"`
	// CorrelationID identifies a 5xx answer in the handler's log, where
	// its details are; absent on other answers.
	CorrelationID string `json:"correlation_id,omitempty"`
}

func suspensionOf(s store.Suspension) Suspension {
	return Suspension{
		ID: s.ID, MachineID: s.MachineID, Status: string(s.Status), Kind: s.Kind, Name: s.Name,
		Reason: s.Reason, Deadline: s.Deadline, CreatedAt: s.CreatedAt,
	}
}
