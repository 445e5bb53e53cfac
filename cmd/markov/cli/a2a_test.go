package cli

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/a2a"
	"github.com/markov-agents/markov/examples/approval/refund"
)

// markov a2a serves the charter over HTTP: the refund demo's first
// message asks for an approval, and its task waits for the answer.
func TestA2A(t *testing.T) {
	addrs := make(chan net.Addr, 1)
	var errb syncBuffer
	c := &CLI{Charter: refundCharter(t), Node: refund.NodeName, Stderr: &errb, onListen: func(a net.Addr) { addrs <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- c.Run(ctx, []string{"a2a", "--db", filepath.Join(t.TempDir(), "a2a.db"), "--addr", "127.0.0.1:0", "--sweep", "0"})
	}()
	var addr net.Addr
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("a2a ended early: %v\n%s", err, errb.String())
	case <-time.After(10 * time.Second):
		t.Fatal("a2a did not listen")
	}
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), "http://"+addr.String())
	require.NoError(t, err)
	client, err := a2aclient.NewFromCard(t.Context(), card)
	require.NoError(t, err)
	res, err := client.SendMessage(t.Context(), &sdk.SendMessageRequest{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart("hello"))})
	require.NoError(t, err)
	task, ok := res.(*sdk.Task)
	require.True(t, ok)
	require.Equal(t, sdk.TaskStateInputRequired, task.Status.State, "the refund demo asks for an approval")
	cancel()
	require.NoError(t, <-done, "markov a2a stops on its context")
	require.Contains(t, errb.String(), "serving A2A")
}

func TestA2AFlags(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a2a.db")
	c := &CLI{Charter: refundCharter(t), Stderr: io.Discard}
	require.EqualError(t, c.Run(context.Background(), []string{"a2a", "--db", db}), "--node is required")
	err := c.Run(context.Background(), []string{"a2a", "--db", db, "--node", "nowhere"})
	require.ErrorIs(t, err, a2a.ErrInvalidConfig)
	for _, cmd := range [][]string{{"a2a", "--node", refund.NodeName}, {"serve"}} {
		for _, bad := range []string{"push", "/a2a/push/"} {
			err := c.Run(context.Background(), append(cmd, "--db", db, "--a2a-push", bad))
			require.EqualError(t, err, `--a2a-push "`+bad+`": want a path like /a2a/push`, cmd[0])
		}
	}
}
