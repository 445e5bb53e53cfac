package instance_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/markov-agents/markov/instance"
)

func ExampleDecode() {
	type refund struct {
		OrderID string  `json:"order_id"`
		Amount  float64 `json:"amount"`
	}
	// Metadata, inputs and payloads are kept as raw JSON on the suspended
	// call, so they survive serialization whatever their Go type; decode
	// them into the type you expect when you need them.
	meta, err := instance.EncodePayload(refund{OrderID: "A-42", Amount: 89.90})
	if err != nil {
		panic(err)
	}
	call := instance.SuspendedCall{SuspendID: "s1", Name: "request_refund", Metadata: meta}
	fmt.Println("raw:", string(call.Metadata))

	r, err := instance.Decode[refund](call.Metadata)
	if err != nil {
		panic(err)
	}
	fmt.Printf("decoded: %+v\n", r)

	// An int stays an int: no float64 surprise from decoding into any.
	n, _ := instance.Decode[int](json.RawMessage("42"))
	fmt.Printf("%T %d\n", n, n)

	// A value of the wrong shape fails with ErrPayloadDecode.
	_, err = instance.Decode[int](call.Metadata)
	fmt.Println(errors.Is(err, instance.ErrPayloadDecode))
	// Output:
	// raw: {"order_id":"A-42","amount":89.9}
	// decoded: {OrderID:A-42 Amount:89.9}
	// int 42
	// true
}
