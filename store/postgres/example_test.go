package postgres_test

import (
	"context"
	"log"
	"os"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store/postgres"
)

// charter stands for the application's charter, built once at startup.
var charter *machine.Charter

// Open connects to PostgreSQL and creates or upgrades the store's tables
// in their schema ("markov" unless Config.Schema says otherwise); processes
// starting at once take turns on an advisory lock. A durable.Runner on the
// store lets every process of a fleet run, resume and sweep the same
// machines. (This example needs a server: it is compiled, not run.)
func Example() {
	ctx := context.Background()
	s, err := postgres.Open(ctx, postgres.Config{
		// For example postgres://markov@db.internal:5432/agents?sslmode=verify-full
		ConnString: os.Getenv("DATABASE_URL"),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	runner, err := durable.New(durable.Config{Store: s, Charter: charter})
	if err != nil {
		log.Fatal(err)
	}
	ids, err := runner.Machines(ctx)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("%d machines in the store", len(ids))
}
