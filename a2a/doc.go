// Package a2a speaks the Agent2Agent protocol (A2A 1.0) with the official
// Go SDK, github.com/a2aproject/a2a-go/v2.
//
// The server direction serves a charter as an A2A agent: [NewServer]
// returns an http.Handler with the agent card (generated from the
// charter), the JSON-RPC binding and the HTTP+JSON binding. An A2A
// context is a durable machine, a task the work one message starts. A
// run that suspends ends its task's execution input-required: the status
// message carries the suspension's reason and a data part its suspend ID
// and payload schema; the client's next message on the task answers it
// (a data part is the payload, a text part answers a free-form
// suspension), checked against the schema by the protocol layer's
// suspension bridge before anything is consumed. A suspension decided
// somewhere else — one that waits for an event, or whose metadata says
// so ([DecidedElsewhere]) — is auth-required instead, and the task goes
// on once the console, the HTTP API or a Go caller resolves it. Tasks
// and push notification configurations live in the runner's store
// (store.RecordKeeper), so any process on the same database serves any
// task, and a restart loses none. See docs/A2A.md.
package a2a
