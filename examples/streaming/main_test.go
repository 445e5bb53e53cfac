package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	require.NoError(t, Run(context.Background(), filepath.Join(t.TempDir(), "m.db"), &out))
	require.Equal(t, `== in process
I'm sorry about the blender. I'll ask a manager to approve the refund.
→ request_refund {"order_id":"A-1042","amount":89.9,"reason":"arrived broken"}
waiting: refund of $89.90 for order A-1042 needs a manager's approval
== from the event log
1: text "I'm sorry about the blender. I'll ask a manager to approve the refund."
4: waiting: refund of $89.90 for order A-1042 needs a manager's approval
`, out.String())
}
