package cli

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/markov-agents/markov/store"
)

// AuditLine is a line of `markov audit export`: one entry of the store's
// audit log, bytes in base64 except the entry, which is JSON
// (durable.AuditRecord).
type AuditLine struct {
	Seq       int64           `json:"seq"`
	MachineID string          `json:"machine_id"`
	Entry     json.RawMessage `json:"entry"`
	Prev      []byte          `json:"prev"`
	Hash      []byte          `json:"hash"`
	Signature []byte          `json:"signature,omitempty"`
}

// Audit verifies the store's audit log (verify) or writes it as JSON
// lines (export).
func Audit(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("audit")
	key := fs.String("public-key", "", "verify the entries' signatures with this ed25519 public `key` (base64)")
	out := OutputFlag(fs)
	pos, err := c.ParseArgs(fs, "audit", args, 1, 1, "verify or export")
	if err != nil {
		return err
	}
	var pub ed25519.PublicKey
	if *key != "" {
		b, err := base64.StdEncoding.DecodeString(*key)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return Usagef("audit", "--public-key: want a base64 ed25519 public key of %d bytes", ed25519.PublicKeySize)
		}
		pub = b
	}
	if pos[0] != "verify" && pos[0] != "export" {
		return Usagef("audit", "want verify or export, got %q", pos[0])
	}
	db, err := c.OpenReadOnly(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	l, ok := db.Store.(store.AuditLog)
	if !ok {
		return fmt.Errorf("%s keeps no audit log", db.Name)
	}
	if pos[0] == "export" {
		enc := json.NewEncoder(c.Out())
		_, err := store.VerifyAudit(ctx, l, pub, func(e store.AuditEntry) error {
			return enc.Encode(AuditLine{Seq: e.Seq, MachineID: e.MachineID, Entry: e.Entry, Prev: e.Prev, Hash: e.Hash, Signature: e.Signature})
		})
		return err
	}
	n, err := store.VerifyAudit(ctx, l, pub, nil)
	if err != nil {
		return fmt.Errorf("audit log of %s: %w", db.Name, err)
	}
	if *out == FormatJSON {
		return c.WriteJSON(map[string]any{"entries": n, "signatures": pub != nil, "intact": true})
	}
	signed := ""
	if pub != nil {
		signed = ", every signature valid"
	}
	_, err = fmt.Fprintf(c.Out(), "audit log of %s: %d entries, chain intact%s\n", db.Name, n, signed)
	return err
}
