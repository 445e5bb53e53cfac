package fakeapi

import (
	"encoding/json"

	"github.com/markov-agents/markov/llm"
)

// Tools the adapters' tests offer the model. Both adapters send them in
// their golden tool round-trip requests, so they are defined once.
var (
	// LookupOrderTool looks up an order: a strict schema (no additional
	// properties).
	LookupOrderTool = llm.ToolSpec{
		Name:        "lookup_order",
		Description: "Look up an order by ID.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"integer"}},"required":["order_id"],"additionalProperties":false}`),
	}
	// RefundTool refunds an order: a schema with an optional property.
	RefundTool = llm.ToolSpec{
		Name:        "refund",
		Description: "Refund an order.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"integer"},"reason":{"type":"string"}},"required":["order_id"]}`),
	}
)
