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

func BenchmarkSave(b *testing.B) {
	storetest.BenchmarkSave(b, func(b *testing.B) store.Store { return memstore.New() })
}
