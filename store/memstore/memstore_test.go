package memstore_test

import (
	"testing"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return memstore.New() })
}

// coreOnly hides memstore's optional capabilities: it is only a
// store.Store, and gets only the core checks.
type coreOnly struct{ store.Store }

func TestConformanceCoreOnly(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return coreOnly{memstore.New()} })
}

// snapshotsOnly is a store.Snapshots and nothing else.
type snapshotsOnly struct{ store.Snapshots }

func TestConformanceSnapshotsOnly(t *testing.T) {
	storetest.RunSnapshots(t, func(t *testing.T) store.Snapshots { return snapshotsOnly{memstore.New()} })
}

func BenchmarkSave(b *testing.B) {
	storetest.BenchmarkSave(b, func(b *testing.B) store.Store { return memstore.New() })
}
