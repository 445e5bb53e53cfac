package serialize

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// State evolution: a state saved with a field its node's type no longer
// has fails to load, naming the field, unless the node migrates it.

// Two builds of node "cart": the current one renamed Items to Entries.
type cartBefore struct {
	Items []string `json:"items"`
}

type cartAfter struct {
	Entries []string `json:"entries"`
}

// soloCharter is a charter with one node, cart, built from cfg, and the
// packs given.
func soloCharter[S any](t testing.TB, cfg node.Config[S], packs ...*node.Pack) *machine.Charter {
	t.Helper()
	cfg.Packs = packs
	n, err := node.New("cart", cfg)
	require.NoError(t, err)
	c, err := machine.NewCharter(machine.CharterConfig{Model: scripted.New(), Nodes: []*node.Node{n}})
	require.NoError(t, err)
	return c
}

func renameCart(from int, raw json.RawMessage) (cartAfter, error) {
	var old cartBefore
	err := json.Unmarshal(raw, &old)
	return cartAfter{Entries: old.Items}, err
}

// requireUnknownFields checks that err is the load error of a state with
// the unknown fields named.
func requireUnknownFields(t *testing.T, err error, fields ...string) {
	t.Helper()
	require.ErrorIs(t, err, ErrUnknownFields)
	require.ErrorIs(t, err, instance.ErrInvalidState)
	require.ErrorIs(t, err, machine.ErrInvalidTree)
	var uf *UnknownFieldsError
	require.ErrorAs(t, err, &uf)
	require.Equal(t, fields, uf.Fields)
	for _, f := range fields {
		require.ErrorContains(t, err, `"`+f+`"`)
	}
}

func TestRenamedFieldFailsToLoad(t *testing.T) {
	saved := must(soloCharter(t, node.Config[cartBefore]{}).NewMachine("cart", cartBefore{Items: []string{"first"}}))
	for _, form := range forms {
		t.Run(form.name, func(t *testing.T) {
			data, err := form.marshal(saved)
			require.NoError(t, err)

			_, err = form.unmarshal(soloCharter(t, node.Config[cartAfter]{}), data)
			requireUnknownFields(t, err, "items")

			calls := 0
			migrated := soloCharter(t, node.Config[cartAfter]{StateVersion: 1, Migrate: func(from int, raw json.RawMessage) (cartAfter, error) {
				calls++
				require.Equal(t, 0, from)
				return renameCart(from, raw)
			}})
			m, err := form.unmarshal(migrated, data)
			require.NoError(t, err)
			require.Equal(t, cartAfter{Entries: []string{"first"}}, m.Root().State)
			require.Equal(t, 1, calls)

			// Saved again, the state is at version 1: it loads as it is.
			again, err := form.marshal(m)
			require.NoError(t, err)
			m, err = form.unmarshal(migrated, again)
			require.NoError(t, err)
			require.Equal(t, cartAfter{Entries: []string{"first"}}, m.Root().State)
			require.Equal(t, 1, calls)
		})
	}
}

// Removed fields are found at any depth, in pack states too, all of them.
type order struct {
	ID   int    `json:"id"`
	Gift bool   `json:"gift,omitempty"`
	Note string `json:"note,omitempty"`
}

type line struct {
	Label string `json:"label"`
	SKU   string `json:"sku,omitempty"`
}

type deepBefore struct {
	Order   order           `json:"order"`
	Lines   []line          `json:"lines"`
	ByLabel map[string]line `json:"by_label"`
	Owner   string          `json:"owner"`
}

type orderAfter struct {
	ID int `json:"id"`
}

type lineAfter struct {
	Label string `json:"label"`
}

type deepAfter struct {
	Order   *orderAfter          `json:"order"`
	Lines   []lineAfter          `json:"lines"`
	ByLabel map[string]lineAfter `json:"by_label"`
}

func TestRemovedFieldsAtAnyDepthAreNamed(t *testing.T) {
	before := deepBefore{
		Order:   order{ID: 1, Gift: true, Note: "ring twice"},
		Lines:   []line{{Label: "a"}, {Label: "b", SKU: "b-1"}},
		ByLabel: map[string]line{"c": {Label: "c", SKU: "c-1"}},
		Owner:   "ann",
	}
	saved := must(soloCharter(t, node.Config[deepBefore]{}).NewMachine("cart", before))
	for _, form := range forms {
		t.Run(form.name, func(t *testing.T) {
			data, err := form.marshal(saved)
			require.NoError(t, err)
			_, err = form.unmarshal(soloCharter(t, node.Config[deepAfter]{}), data)
			requireUnknownFields(t, err, "by_label.sku", "lines.sku", "order.gift", "order.note", "owner")
		})
	}
}

// The same holds for pack states, which migrate with a PackMigration.
type notesBefore struct {
	Notes  []string `json:"notes"`
	Pinned string   `json:"pinned"`
}

type notesAfter struct {
	Notes []string `json:"notes"`
}

// unpin is the notes pack's migration from version 0: the pinned note
// goes first.
func unpin(from int, raw json.RawMessage) (notesAfter, error) {
	var old notesBefore
	err := json.Unmarshal(raw, &old)
	return notesAfter{Notes: append([]string{old.Pinned}, old.Notes...)}, err
}

func TestRemovedPackFieldFailsToLoad(t *testing.T) {
	saved := must(soloCharter(t, node.Config[cartAfter]{}, node.NewPack("notes", "notes", notesBefore{Notes: []string{"b"}, Pinned: "a"})).NewMachine("cart", nil))
	for _, form := range forms {
		t.Run(form.name, func(t *testing.T) {
			data, err := form.marshal(saved)
			require.NoError(t, err)
			_, err = form.unmarshal(soloCharter(t, node.Config[cartAfter]{}, node.NewPack("notes", "notes", notesAfter{})), data)
			requireUnknownFields(t, err, "pinned")
			require.ErrorContains(t, err, "pack notes")

			migrated := soloCharter(t, node.Config[cartAfter]{}, node.NewPack("notes", "notes", notesAfter{}, node.PackMigration(1, unpin)))
			m, err := form.unmarshal(migrated, data)
			require.NoError(t, err)
			require.Equal(t, notesAfter{Notes: []string{"a", "b"}}, m.Root().Packs["notes"])
			checkCodec(t, "versioned pack", m)

			// Saved again, the pack state is at version 1: it loads as it
			// is, and a build at version 0 refuses it.
			again, err := form.marshal(m)
			require.NoError(t, err)
			m, err = form.unmarshal(migrated, again)
			require.NoError(t, err)
			require.Equal(t, notesAfter{Notes: []string{"a", "b"}}, m.Root().Packs["notes"])
			_, err = form.unmarshal(soloCharter(t, node.Config[cartAfter]{}, node.NewPack("notes", "notes", notesAfter{})), again)
			require.ErrorIs(t, err, ErrStateVersion)
		})
	}
}

var errBadCart = errors.New("bad cart")

func TestMigrationErrorsAreTyped(t *testing.T) {
	saved := must(soloCharter(t, node.Config[cartBefore]{}).NewMachine("cart", cartBefore{Items: []string{"first"}}))
	for _, tc := range []struct {
		name    string
		cfg     node.Config[cartAfter]
		wrapped error
	}{
		{"error", node.Config[cartAfter]{StateVersion: 1, Migrate: func(int, json.RawMessage) (cartAfter, error) {
			return cartAfter{}, errBadCart
		}}, errBadCart},
		{"panic", node.Config[cartAfter]{StateVersion: 1, Migrate: func(int, json.RawMessage) (cartAfter, error) {
			panic("boom")
		}}, nil},
		{"invalid result", node.Config[cartAfter]{StateVersion: 1, Migrate: renameCart, Validate: func(s cartAfter) error {
			if len(s.Entries) > 0 {
				return errBadCart
			}
			return nil
		}}, errBadCart},
	} {
		for _, form := range forms {
			t.Run(tc.name+"/"+form.name, func(t *testing.T) {
				data, err := form.marshal(saved)
				require.NoError(t, err)
				_, err = form.unmarshal(soloCharter(t, tc.cfg), data)
				require.ErrorIs(t, err, node.ErrMigration)
				require.ErrorIs(t, err, instance.ErrInvalidState)
				require.ErrorIs(t, err, machine.ErrInvalidTree)
				if tc.wrapped != nil {
					require.ErrorIs(t, err, tc.wrapped)
				}
			})
		}
	}
}

func TestNewerStateVersionFailsToLoad(t *testing.T) {
	newer := soloCharter(t, node.Config[cartAfter]{StateVersion: 2, Migrate: renameCart})
	saved := must(newer.NewMachine("cart", cartAfter{Entries: []string{"first"}}))
	for _, form := range forms {
		t.Run(form.name, func(t *testing.T) {
			data, err := form.marshal(saved)
			require.NoError(t, err)
			_, err = form.unmarshal(soloCharter(t, node.Config[cartAfter]{StateVersion: 1, Migrate: renameCart}), data)
			require.ErrorIs(t, err, ErrStateVersion)
			require.ErrorIs(t, err, instance.ErrInvalidState)
			require.ErrorIs(t, err, machine.ErrInvalidTree)
		})
	}
}

// The ledger node of the test charter is at state version 2; machines
// saved by its earlier builds — the state and a held transition's state —
// load migrated, in both forms and through MarshalTree and Assemble.
type ledgerV0 struct {
	Items []string `json:"items"`
}

type ledgerV1 struct {
	Entries []string `json:"entries"`
}

func TestLedgerMigratesFromEveryVersion(t *testing.T) {
	want := versionedMachine(t)
	for _, saved := range []*machine.Machine{
		savedLedger(t, node.Config[ledgerV0]{}, ledgerV0{Items: []string{"tea"}}, ledgerV0{Items: []string{"cake"}}),
		savedLedger(t, node.Config[ledgerV1]{StateVersion: 1, Migrate: func(int, json.RawMessage) (ledgerV1, error) {
			return ledgerV1{}, errBadCart
		}}, ledgerV1{Entries: []string{"tea"}}, ledgerV1{Entries: []string{"cake"}}),
	} {
		for _, form := range forms {
			data, err := form.marshal(saved)
			require.NoError(t, err)
			got, err := form.unmarshal(charter(t), data)
			require.NoError(t, err)
			require.Equal(t, ledgerState{Entries: []ledgerEntry{{Label: "tea"}}}, got.Root().State)
			require.Equal(t, ledgerState{Entries: []ledgerEntry{{Label: "cake"}}}, got.Root().Suspension.Reply.Transition.State)
			require.Equal(t, want.Pending(), got.Pending())
		}
		tree, err := MarshalTree(saved)
		require.NoError(t, err)
		got, err := Assemble(charter(t), tree, nil)
		require.NoError(t, err)
		require.Equal(t, ledgerState{Entries: []ledgerEntry{{Label: "tea"}}}, got.Root().State)
	}
}

// savedLedger returns the versioned scenario's machine as an earlier build
// of the ledger node (cfg, with states state and held) had it.
func savedLedger[S any](t *testing.T, cfg node.Config[S], state, held S) *machine.Machine {
	t.Helper()
	ledger, err := node.New("ledger", cfg)
	require.NoError(t, err)
	c, err := machine.NewCharter(machine.CharterConfig{Model: scripted.New(), Nodes: []*node.Node{ledger}})
	require.NoError(t, err)
	root := versionedMachine(t).Root()
	root.State = state
	root.Suspension.Reply.Transition.State = held
	root.Packs = nil
	m, err := machine.Restore(c, root, message.NewHistory([]message.Message{message.UserText("post 5 for cake")}))
	require.NoError(t, err)
	return m
}

// knownKeys, the fast check of the JSON form, agrees with a strict
// encoding/json decoder: it may send a clean state to the decoder (never
// the other way round), and decodeJSON's answer is the decoder's.
type withText struct{ v string }

func (w *withText) UnmarshalText(b []byte) error { w.v = string(b); return nil }

type keysState struct {
	Name   string               `json:"name"`
	Count  int                  // no tag: "Count", matched in any case
	Nested *orderAfter          `json:"nested"`
	Lines  []lineAfter          `json:"lines"`
	ByKey  map[string]lineAfter `json:"by_key"`
	Any    any                  `json:"any"`
	Text   withText             `json:"text"`
	Skip   string               `json:"-"`
	lineAfter
}

func TestKnownKeys(t *testing.T) {
	typ := reflect.TypeFor[keysState]()
	for _, tc := range []struct {
		raw   string
		known bool
	}{
		{`{}`, true},
		{`null`, true},
		{` { "name" : "a\"}" , "count": 1, "COUNT": 2, "Name": "b" } `, true},
		{`{"nested":{"id":1},"lines":[{"label":"x"},{"label":"y"}],"by_key":{"Q":{"label":"z"}}}`, true},
		{`{"any":{"whatever":[1,{"deep":true}]},"text":"t","label":"promoted"}`, true},
		{`{"nested":null,"lines":null,"by_key":null,"name":"\u00e9"}`, true},
		{`{"nested":{"id":1,"gift":true}}`, false},
		{`{"lines":[{"label":"x"},{"label":"y","sku":"s"}]}`, false},
		{`{"by_key":{"a":{"sku":"s"}}}`, false},
		{`{"skip":"x"}`, false},
		{`{"nam\u0065":"escaped keys go to the decoder"}`, false},
		{`{"items":[]}`, false},
	} {
		require.Equal(t, tc.known, knownKeys(typ, []byte(tc.raw)), tc.raw)
		strict := json.NewDecoder(strings.NewReader(tc.raw))
		strict.DisallowUnknownFields()
		strictErr := strict.Decode(new(keysState))
		_, err := codecFor(typ).decodeJSON([]byte(tc.raw))
		require.Equal(t, strictErr == nil, err == nil, tc.raw)
		if tc.known {
			require.NoError(t, strictErr, "knownKeys accepted what the decoder refuses: %s", tc.raw)
		}
	}
}

// FuzzKnownKeys: whenever knownKeys accepts valid JSON, a strict decoder
// finds no unknown field in it (otherwise the JSON form would load a state
// without a field's data).
func FuzzKnownKeys(f *testing.F) {
	for _, s := range []string{`{"name":"a","Count":1}`, `{"nested":{"id":1,"gift":true}}`, `{"lines":[{"label":"x"}],"by_key":{"k":{"label":"y"}}}`, `{"any":{"x":1},"text":"t"}`} {
		f.Add([]byte(s))
	}
	typ := reflect.TypeFor[keysState]()
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) || !knownKeys(typ, raw) {
			return
		}
		strict := json.NewDecoder(bytes.NewReader(raw))
		strict.DisallowUnknownFields()
		if err := strict.Decode(new(keysState)); err != nil && strings.Contains(err.Error(), "unknown field") {
			t.Fatalf("knownKeys accepted %s: %v", raw, err)
		}
	})
}
