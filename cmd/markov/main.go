// Command markov is the command line of the markov library, wired to the
// refund demo's charter (package examples/approval/refund): a support
// agent whose request_refund tool suspends until a manager approves.
//
//	go run ./cmd/markov demo
//
// runs the demo end to end: a machine is created in a SQLite file, runs
// the customer's request until the refund tool suspends, and is left in
// the store; a second process (this program, re-executed) finds it by its
// suspend ID, resumes it with the manager's approval and prints the final
// answer; the first process then reads the final state back from the
// store. It runs offline on a scripted model, and on a real one when
// ANTHROPIC_API_KEY or OPENAI_API_KEY is set (MARKOV_MODEL picks the model
// name, OPENAI_BASE_URL an OpenAI-compatible server).
//
// Usage:
//
//	markov [--store FILE|URL] [--schema S] <command> [flags] [args]
//
//	demo [--db FILE]                  run the approval demo across two processes
//	pending [--machine ID] [--status pending|resolved|expired|cancelled] [--expired] [-o text|json]
//	                                  list pending suspensions
//	inspect [-n N] [-o text|json] [machine-id]
//	                                  show a machine (no ID: list machines)
//	create [--id ID] [--state JSON] [-o text|json] <node>
//	                                  create a stored machine, print its ID
//	run [-o text|json] <machine-id> [message...]
//	                                  send a machine a message and run it
//	invoke [--instance ID] [-o text|json] <machine-id> <command> [input-json]
//	                                  invoke a command on a stored machine
//	resume [--error] [--text] [-o text|json] <suspend-id> <payload>
//	                                  resume a suspension with a JSON payload
//	cancel [-o text|json] <suspend-id> [reason...]
//	                                  cancel a suspension
//	graph [--format mermaid|graphviz] print the charter's node graph
//	serve [--addr HOST:PORT] [--secret-env VAR] [--sweep DURATION]
//	      [--workers N] [--shutdown-timeout D] [--max-wait D] [--console]
//	      [--read-timeout D] [--write-timeout D] [--idle-timeout D]
//	      [--a2a-push PATH]
//	                                  serve the HMAC-signed HTTP resume endpoint
//	                                  (202 Accepted, or the run's summary within
//	                                  Prefer: wait=N up to --max-wait; timeouts
//	                                  default to resumehttp's: 15s, 5m, 15s)
//	                                  and run machines in the background: the
//	                                  sweeper on SQLite, fleet workers on PostgreSQL
//	worker --store postgres://… [--workers N] [--shutdown-timeout D] [--health HOST:PORT]
//	                                  run a fleet's workers, with no HTTP API
//	parked [-n N] [-o text|json]      list the machines a fleet parked, with their errors
//	acp [--node NAME] [--sweep DURATION] [--watch DURATION]
//	                                  serve the charter as an ACP agent on stdin/stdout
//	mcp [--node NAME] [--http HOST:PORT] [--secret-env VAR] [--state-ttl D] [--sweep D]
//	                                  serve the charter as an MCP server on stdin/stdout,
//	                                  or stateless Streamable HTTP (--http)
//	a2a [--addr HOST:PORT] [--node NAME] [--url URL] [--sweep D]
//	    [--allow-private-push] [--a2a-push PATH]
//	                                  serve the charter as an A2A agent over HTTP
//	                                  (push notifications from an outbox in the store)
//	version [-o text|json]            print the version and the Go version
//	help [command]                    print help (also -h, --help, <command> -h)
//
// --store (or --db) defaults to markov.db, a SQLite file in the current
// directory (the demo uses a fresh temporary database unless --db is
// given); a postgres:// URL names a fleet's PostgreSQL database (--schema,
// default markov), where serve and worker run the fleet's workers and stop
// gracefully on SIGTERM (--shutdown-timeout). -o json prints stable,
// machine-readable output (documented in package cmd/markov/cli). Help
// goes to stdout. Exit status: 0 on success (help included), 1 when a
// command fails, 2 on a bad command line (the usage goes to stderr).
//
// MARKOV_CHARTER=acpdemo makes every command run the ACP demo's charter
// (package acp/acpdemo, a deterministic desk agent) instead of the refund
// one: "MARKOV_CHARTER=acpdemo markov acp" is an ACP agent that shows
// every kind of wait offline.
//
// The stored machines can only be run by a program that has their charter,
// since the charter holds the Go code of their tools. This binary knows the
// refund charter only; a real application builds its own binary around
// package cmd/markov/cli with its own charter.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/markov-agents/markov/acp/acpdemo"
	"github.com/markov-agents/markov/cmd/markov/cli"
	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/machine"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args (without the program name) and returns
// the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	charter, node, desc, err := pickCharter(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "markov: %v\n", err)
		return cli.ExitError
	}
	c := &cli.CLI{
		Name:     "markov",
		Charter:  charter,
		Node:     node,
		Model:    desc,
		Commands: []cli.Command{demoCommand},
		Stdout:   stdout,
		Stderr:   stderr,
	}
	return c.Main(ctx, args)
}

// pickCharter returns the charter the commands run, the node acp starts
// sessions at and the model's description: the refund demo's, or the ACP
// demo's (package acp/acpdemo, on its scripted model) when
// MARKOV_CHARTER is "acpdemo".
func pickCharter(getenv func(string) string) (*machine.Charter, string, string, error) {
	switch name := getenv("MARKOV_CHARTER"); name {
	case "", "refund":
	case "acpdemo":
		charter, err := acpdemo.NewCharter(acpdemo.ScriptedModel())
		return charter, acpdemo.NodeName, "scripted (the ACP demo's desk)", err
	default:
		return nil, "", "", fmt.Errorf("MARKOV_CHARTER=%q: want refund or acpdemo", name)
	}
	model, desc, err := refund.ModelFromEnv()
	if err != nil {
		return nil, "", "", err
	}
	charter, err := refund.NewCharter(model)
	return charter, refund.NodeName, desc, err
}
