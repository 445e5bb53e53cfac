package cli

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite"
)

// auditEntries is how many entries fillAudit appends.
const auditEntries = 4

// fillAudit appends auditEntries signed entries to l, one transaction
// each.
func fillAudit(t *testing.T, l store.AuditLog, key ed25519.PrivateKey) {
	t.Helper()
	for i := 1; i <= auditEntries; i++ {
		entry := fmt.Appendf(nil, `{"kind":"decision","by":"approver-%d"}`, i)
		require.NoError(t, l.AppendAudit(context.Background(), []store.AuditAppend{{MachineID: "till", Entry: entry, Signature: ed25519.Sign(key, entry)}}))
	}
}

// tampers edit an audit log behind the store's back, as SQL on table
// {log} ({chain} is the hash of a row, store.ChainHash): each is a way
// to rewrite history quietly, and what `markov audit verify` then says.
var tampers = []struct {
	name, want string
	sql        []string
}{
	{"changed", "entry 2: changed", []string{`UPDATE {log} SET entry = CAST('{"kind":"decision","by":"mallory"}' AS BLOB) WHERE seq = 2`}},
	{"removed", "entry 2: missing", []string{`DELETE FROM {log} WHERE seq = 2`}},
	{"reordered", "entry 2: does not follow", []string{
		`UPDATE {log} SET seq = -1 WHERE seq = 2`, `UPDATE {log} SET seq = 2 WHERE seq = 3`, `UPDATE {log} SET seq = 3 WHERE seq = -1`}},
	{"cut short", "the log ends at entry 3, its head is entry 4", []string{`DELETE FROM {log} WHERE seq = 4`}},
	{"rehashed", "entry 3: does not follow", []string{
		`UPDATE {log} SET entry = CAST('{}' AS BLOB) WHERE seq = 2`, `UPDATE {log} SET hash = {chain} WHERE seq = 2`}},
}

// checkAudit runs `markov audit` on a database whose log open makes
// (the arguments locate it), and on one edited by each of tampers with
// exec.
func checkAudit(t *testing.T, open func(t *testing.T) (store.AuditLog, []string, func(sql string) error)) {
	pub, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	charter := refundCharter(t)
	pubArg := base64.StdEncoding.EncodeToString(pub)

	l, args, _ := open(t)
	fillAudit(t, l, key)
	res := run(t, charter, append([]string{"audit", "--public-key", pubArg, "verify"}, args...)...)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "4 entries, chain intact, every signature valid")
	res = run(t, charter, append([]string{"audit", "export"}, args...)...)
	require.Equal(t, ExitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, auditEntries)
	var line AuditLine
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &line))
	require.Equal(t, int64(2), line.Seq)
	require.JSONEq(t, `{"kind":"decision","by":"approver-2"}`, string(line.Entry))
	other, _, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	res = run(t, charter, append([]string{"audit", "--public-key", base64.StdEncoding.EncodeToString(other), "verify"}, args...)...)
	require.Equal(t, ExitError, res.code)
	require.Contains(t, res.stderr, "entry 1: signature does not verify")

	for _, tc := range tampers {
		t.Run(tc.name, func(t *testing.T) {
			l, args, exec := open(t)
			fillAudit(t, l, key)
			for _, q := range tc.sql {
				require.NoError(t, exec(q))
			}
			res := run(t, charter, append([]string{"audit", "verify"}, args...)...)
			require.Equal(t, ExitError, res.code, res.stdout)
			require.Contains(t, res.stderr, tc.want)
			require.Contains(t, res.stderr, "audit log chain broken at entry")
		})
	}
}

func TestAuditOnSQLite(t *testing.T) {
	checkAudit(t, func(t *testing.T) (store.AuditLog, []string, func(string) error) {
		path := filepath.Join(t.TempDir(), "audit.db")
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		raw, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		t.Cleanup(func() { raw.Close() })
		return st, []string{"--db", path}, func(q string) error {
			q = strings.ReplaceAll(q, "{chain}", "markov_audit_chain(prev, entry)")
			_, err := raw.Exec(strings.ReplaceAll(q, "{log}", "audit_log"))
			return err
		}
	})
}

func TestAuditOnPostgres(t *testing.T) {
	checkAudit(t, func(t *testing.T) (store.AuditLog, []string, func(string) error) {
		st, url, schema := pgtest.Open(t)
		return st, []string{"--store", url, "--schema", schema}, func(q string) error {
			q = strings.ReplaceAll(strings.ReplaceAll(q, "AS BLOB", "AS bytea"), "{chain}", "sha256(prev || entry)")
			_, err := st.Pool().Exec(context.Background(), strings.ReplaceAll(q, "{log}", schema+".audit_log"))
			return err
		}
	})
}
