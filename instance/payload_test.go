package instance_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
)

func TestEncodePayload(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want string
		err  bool
	}{
		{"nil", nil, "", false},
		{"raw JSON", json.RawMessage(`{"a":1}`), `{"a":1}`, false},
		{"invalid raw JSON", json.RawMessage(`{"a":`), "", true},
		// A webhook body handed over as []byte reaches the model as the
		// JSON it is, not base64.
		{"JSON bytes", []byte(`{"status":"passed"}`), `{"status":"passed"}`, false},
		{"text bytes", []byte("build 9 passed"), `"build 9 passed"`, false},
		{"empty bytes", []byte{}, `""`, false},
		{"binary bytes", []byte{0xff, 0xfe}, "", true},
		{"string", "ok", `"ok"`, false},
		{"value", map[string]int{"n": 1}, `{"n":1}`, false},
		{"unencodable", func() {}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := instance.EncodePayload(tc.in)
			if tc.err {
				require.ErrorIs(t, err, instance.ErrPayloadDecode)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}

func TestEncodePayloadCopiesBytes(t *testing.T) {
	in := []byte(`{"a":1}`)
	got, err := instance.EncodePayload(in)
	require.NoError(t, err)
	in[5] = '2'
	require.Equal(t, `{"a":1}`, string(got))
}

func TestPayloadError(t *testing.T) {
	var err error = &instance.PayloadError{SuspendID: "s1", Field: "approved", Violation: "expected boolean, got string"}
	require.ErrorIs(t, err, instance.ErrPayloadDecode)
	require.Equal(t, "instance: suspension s1: payload: approved: expected boolean, got string", err.Error())
	var pe *instance.PayloadError
	require.True(t, errors.As(err, &pe))
	require.Equal(t, "payload: approved: expected boolean, got string", pe.Message())
	whole := &instance.PayloadError{SuspendID: "s1", Violation: "missing"}
	require.Equal(t, "payload: missing", whole.Message())
}

func TestInputError(t *testing.T) {
	var err error = &instance.InputError{Field: "amount", Violation: "expected number, got string"}
	require.ErrorIs(t, err, instance.ErrInvalidInput)
	require.Equal(t, "instance: invalid input: amount: expected number, got string", err.Error())
	var ie *instance.InputError
	require.True(t, errors.As(err, &ie))
	require.Equal(t, "input: amount: expected number, got string", ie.Message())
	require.Equal(t, "input: expected object, got string", (&instance.InputError{Violation: "expected object, got string"}).Message())
}
