package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// Desk's call waits on legal's auth-required task; the lawyer's sign-off
// completes the task, whose push notification wakes desk's call: desk
// answers with legal's result.
func TestDelegation(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), t.TempDir(), &out))
	require.Equal(t, `desk waits: the agent legal waits for an authorization: sign off the supplier contract
legal waits: sign off the supplier contract
the lawyer signed off
desk: Legal says: Reviewed: approved by the lawyer
`, out.String())
}
