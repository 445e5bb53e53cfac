package mcp

import "errors"

var (
	// ErrInvalidConfig reports a Config New cannot build a Client from.
	ErrInvalidConfig = errors.New("mcp: invalid config")
	// ErrInvalidSchema reports a JSON Schema from a server that markov
	// cannot use: not JSON, not an object schema, too large, or one that
	// does not compile.
	ErrInvalidSchema = errors.New("mcp: invalid schema")
	// ErrServer reports a fault of the server or of the connection to it:
	// it exited, hung past the call timeout, broke the protocol, or
	// answered with an error or an oversized result. A tool call that
	// meets one fails with an error result the model sees, and the client
	// connects again on the next call.
	ErrServer = errors.New("mcp: server fault")
)
