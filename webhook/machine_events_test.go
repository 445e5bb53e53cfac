package webhook_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
	"github.com/markov-agents/markov/webhook"
	"github.com/stretchr/testify/require"
)

// A subscription to the machine events receives machine.finished once a
// run ends with the machine done — its last answer and revision — and
// machine.parked once it is parked, with the errors, each verified by
// the standardwebhooks library; a subscription whose filter leaves them
// out gets no delivery of them. On SQLite (deliveries from the lasting
// outbox) and on PostgreSQL (River jobs).
func TestSenderMachineEvents(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) store.Store{
		"sqlite":   func(t *testing.T) store.Store { return sqlitetest.Open(t, sqlitetest.Path(t)) },
		"postgres": func(t *testing.T) store.Store { st, _, _ := pgtest.Open(t); return st },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t)
			e := newEnvOn(t, st, approvals)
			machines, suspensions := newReceiver(t, http.StatusNoContent), newReceiver(t, http.StatusNoContent)
			s := startSender(t, e, webhook.SenderConfig{AllowPrivate: true, Subscriptions: []webhook.Subscription{
				{ID: "machines", URL: machines.srv.URL, Secret: secretA, Events: []webhook.EventType{webhook.MachineFinished, webhook.MachineParked}},
				{ID: "approvals", URL: suspensions.srv.URL, Secret: secretB, Events: []webhook.EventType{webhook.SuspensionCreated, webhook.SuspensionResolved}}}})
			e.wait("m1", "approve-1", "")
			_, err := e.runner.AcceptResume(ctx, machine.ResumeInput{SuspendID: "approve-1", Payload: "ok"})
			require.NoError(t, err)
			said := e.said("m1")
			require.NotEmpty(t, said)
			status, err := e.runner.Status(ctx, "m1")
			require.NoError(t, err)
			require.NoError(t, st.(store.Parker).Park(ctx, "m1", "sweep machine m1: boom", time.Now()))

			require.Eventually(t, func() bool { return len(machines.all()) == 2 && len(suspensions.all()) == 2 }, 30*time.Second, 5*time.Millisecond)
			got := map[webhook.EventType]webhook.Event{}
			for _, d := range machines.all() {
				res := sw(t, map[string]any{"op": "verify", "secret": secretA, "body": d.body, "headers": map[string]string{
					"webhook-id": d.header.Get(webhook.HeaderID), "webhook-timestamp": d.header.Get(webhook.HeaderTimestamp),
					"webhook-signature": d.header.Get(webhook.HeaderSignature)}})
				require.Equal(t, true, res["ok"], res)
				var ev webhook.Event
				require.NoError(t, json.Unmarshal([]byte(d.body), &ev))
				require.Equal(t, "msg_"+strconv.FormatInt(ev.Data.Cursor, 10)+"_machines", d.header.Get(webhook.HeaderID))
				got[ev.Type] = ev
			}
			fin, parked := got[webhook.MachineFinished].Data, got[webhook.MachineParked].Data
			require.Equal(t, webhook.EventData{MachineID: "m1", Status: "finished", Revision: status.Revision, Answer: said, Cursor: fin.Cursor}, fin)
			require.Equal(t, webhook.EventData{MachineID: "m1", Status: "parked", Revision: status.Revision,
				Errors: []string{"sweep machine m1: boom"}, Cursor: parked.Cursor}, parked)
			require.Greater(t, parked.Cursor, fin.Cursor)

			// The deliveries of the machine events exist, so their changes
			// were handed to every subscription: the filtered one got none.
			for _, d := range deliveries(t, s, "", 0) {
				if d.Subscription == "approvals" {
					require.Contains(t, []webhook.EventType{webhook.SuspensionCreated, webhook.SuspensionResolved}, d.Type)
				}
			}
			for _, d := range suspensions.all() {
				var ev webhook.Event
				require.NoError(t, json.Unmarshal([]byte(d.body), &ev))
				require.Equal(t, "approve-1", ev.Data.SuspendID)
			}
		})
	}
}
