package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the project's module path.
const module = "github.com/markov-agents/markov"

// msgpack is the one third-party module only serialize may import.
const msgpack = "github.com/vmihailenco/msgpack/v5"

// rule says where a package sits and what it may import.
type rule struct {
	// layer orders the packages: a package may import project packages of
	// strictly lower layers, and no package may import one of a higher or
	// equal layer unless listed in also.
	layer int
	// also lists project packages (relative to the module) the package may
	// import whatever their layer.
	also []string
	// only, when set, replaces the layer rule: the package may import
	// exactly the project packages listed (none when empty).
	only []string
	// restricted says only applies, even when it is empty.
	restricted bool
	// stdlib forbids every import outside the standard library.
	stdlib bool
	// anything lifts every rule but the msgpack one (cmd, examples).
	anything bool
}

// Layers of the non-layered packages: adapters are imported by nothing
// but commands and examples; those are imported by nothing.
const (
	adapterLayer = 90
	topLayer     = 100
)

var adapter = rule{layer: adapterLayer, restricted: true, only: []string{"llm", "message"}}

// sdkAdapter is an adapter on a provider SDK: it may also use llm/internal/adapter.
var sdkAdapter = rule{layer: adapterLayer, restricted: true, only: []string{"llm", "message", "llm/internal/adapter"}}

// layers is docs/ARCHITECTURE.md §2 as data. Keys are package paths relative to the
// module; a key ending in "/..." matches every package below that path
// (not the path itself). A package that matches no key fails the test:
// add new packages here.
var layers = map[string]rule{
	"message":             {layer: 0, stdlib: true},
	"llm":                 {layer: 0, also: []string{"message"}, stdlib: true},
	"internal/mergepatch": {layer: 0, stdlib: true},
	"internal/archtest":   {layer: 0, stdlib: true},
	// doccheck checks the docs' quoted code and links; only tests import it.
	"internal/doccheck": {layer: 0, stdlib: true},
	// errtext words bad-input errors alike (clipped values, one-of names).
	"internal/errtext": {layer: 0, stdlib: true},
	// faillimit limits clients that fail authentication (the API, the console).
	"internal/faillimit": {layer: 0, stdlib: true},
	// redelivery answers a redelivered request with the first outcome
	// (resumehttp, webhook): the store's replay guard.
	"internal/redelivery": {layer: 6, also: []string{"store"}},
	// schematype reads a JSON Schema's type (console, acp).
	"internal/schematype": {layer: 0, stdlib: true},
	"instance":            {layer: 1},
	"internal/frame":      {layer: 1, also: []string{"instance"}},
	"internal/tracing":    {layer: 0},
	// telemetry is the OpenTelemetry vocabulary (GenAI conventions,
	// metrics, traceparent) executor, machine and durable share.
	"internal/telemetry": {layer: 1},
	// oteltest reads the SDK's in-memory exporters; only _test.go files
	// import it.
	"internal/oteltest": {layer: 1, restricted: true},
	// livehub fans live notices out within a process, for the stores.
	"internal/livehub": {layer: 0, stdlib: true},
	// testkit is the helpers tests share; only _test.go files (and
	// pgtest, which only tests import) import it.
	"internal/testkit": {layer: 1, stdlib: true},
	// access hands executor and machine the plumbing node and command keep
	// unexported; node and command install it, so it sits below them.
	"internal/access": {layer: 1, also: []string{"instance", "internal/frame"}},
	"command":         {layer: 2},
	// standing is standing approvals: rules (JSON Schema, CEL) that
	// decide suspensions; durable counts their uses.
	"standing":  {layer: 2},
	"node":      {layer: 3},
	"executor":  {layer: 4},
	"machine":   {layer: 5},
	"serialize": {layer: 6},
	// wiregen writes serialize's wire codec (go generate); nothing imports it.
	"serialize/internal/wiregen": {layer: topLayer, stdlib: true},
	// steptext writes steps as text: machine and below.
	"steptext":  {layer: 6},
	"store":     {layer: 6, restricted: true, stdlib: true},
	"store/...": {layer: 6, restricted: true, only: []string{"store", "internal/livehub", "store/internal/backend"}},
	// backend is what the stores share (their capability set, the SQL
	// stores' Ping and NULL handling).
	"store/internal/backend": {layer: 6, restricted: true, only: []string{"store"}},
	// pgtest gives tests a PostgreSQL schema of their own; only tests
	// import it.
	"store/postgres/pgtest": {layer: topLayer, restricted: true, only: []string{"store/postgres", "internal/testkit"}},
	// sqlitetest opens SQLite stores for tests; only tests import it.
	"store/sqlite/sqlitetest": {layer: topLayer, restricted: true, only: []string{"store/sqlite"}},
	"durable":                 {layer: 7},
	// fleet runs durable machines on River across processes sharing one
	// PostgreSQL: durable and store/postgres.
	"durable/fleet": {layer: 8},
	// durabletest, the crash kit for users' tests, runs durable machines
	// in child processes on the stores (SQLite by default).
	"durable/durabletest": {layer: 8},
	// resumehttp reaches durable through a small interface (docs/ARCHITECTURE.md §2).
	"resumehttp": {layer: 7, also: []string{"durable"}},
	// console is the web page for approvers and operators (layer 8).
	"console": {layer: 8, also: []string{"durable/fleet", "webhook"}},
	// acp is the Agent Client Protocol agent (layer 8); acp/acpdemo the
	// charter of its demo, an example.
	"acp": {layer: 8},
	// bridge is the protocol layer's one suspension bridge (DESIGN.md §8):
	// durable and below; the protocol packages (layer 8) use it.
	"internal/bridge": {layer: 7, also: []string{"durable"}},
	// mcp mounts MCP servers' tools (layer 8).
	"mcp": {layer: 8},
	// a2a serves charters as A2A agents and calls remote ones as tools
	// (layer 8).
	"a2a": {layer: 8},
	// agui is the AG-UI endpoint (layer 8).
	"agui": {layer: 8},
	// webhook serves and sends signed webhooks (layer 8): resumehttp's
	// error statuses, durable through small interfaces.
	"webhook":       {layer: 8},
	"acp/acpdemo":   {layer: topLayer, anything: true},
	"llm/anthropic": sdkAdapter,
	"llm/openai":    sdkAdapter,
	// adapter is the plumbing the SDK adapters share.
	"llm/internal/adapter": {layer: adapterLayer, restricted: true, only: []string{"llm", "message"}},
	"llm/scripted":         adapter,
	"cmd/...":              {layer: topLayer, anything: true},
	"examples/...":         {layer: topLayer, anything: true},
	// bench holds the runtime benchmarks (test files only).
	"bench": {layer: topLayer, anything: true},
	// llmtest is the adapters' conformance suite, imported by their tests
	// only (as store/storetest is by the stores'): placed like an adapter,
	// so no library package may import it.
	"llm/llmtest": adapter,
	// fakeapi is the adapters' test scaffolding, imported by their tests
	// only: placed like an adapter, so no library package may import it.
	// It runs the conformance suite over HTTP.
	"llm/internal/fakeapi": {layer: adapterLayer, restricted: true, only: []string{"llm", "message", "llm/llmtest"}},
}

// msgpackImporters may import msgpack.
var msgpackImporters = []string{"serialize"}

// pkg is what the checker needs of a package: its import path and the
// imports of its non-test files.
type pkg struct {
	ImportPath string
	Imports    []string
	Error      *struct{ Err string }
}

// lookup returns the rule of the package rel (relative to the module).
func lookup(table map[string]rule, rel string) (rule, bool) {
	if r, ok := table[rel]; ok && !strings.HasSuffix(rel, "/...") {
		return r, true
	}
	best, found := "", false
	var out rule
	for k, r := range table {
		prefix, ok := strings.CutSuffix(k, "...")
		if ok && strings.HasPrefix(rel, prefix) && len(prefix) > len(best) {
			best, out, found = prefix, r, true
		}
	}
	return out, found
}

// relative returns path relative to the module and whether it is a
// project package.
func relative(path string) (string, bool) {
	if path == module {
		return "", true
	}
	return strings.CutPrefix(path, module+"/")
}

// isStdlib reports whether path is a standard-library package: its first
// element has no dot (the rule the go command uses).
func isStdlib(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// check returns every violation of table by pkgs, one clear sentence
// each, naming the package and the offending import.
func check(table map[string]rule, pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		rel, ok := relative(p.ImportPath)
		if !ok {
			out = append(out, fmt.Sprintf("%s is not a package of module %s", p.ImportPath, module))
			continue
		}
		r, ok := lookup(table, rel)
		if !ok {
			out = append(out, fmt.Sprintf("package %s has no layer: add it to the layers table in internal/archtest (see docs/ARCHITECTURE.md §2)", relOrRoot(rel)))
			continue
		}
		for _, imp := range p.Imports {
			if v := checkImport(table, rel, r, imp); v != "" {
				out = append(out, fmt.Sprintf("%s imports %s: %s", relOrRoot(rel), imp, v))
			}
		}
	}
	return out
}

// checkImport returns why package rel (with rule r) may not import imp, or
// "" when it may.
func checkImport(table map[string]rule, rel string, r rule, imp string) string {
	if imp == msgpack || strings.HasPrefix(imp, msgpack+"/") {
		if !slices.Contains(msgpackImporters, rel) {
			return "only serialize may import msgpack"
		}
		if r.stdlib {
			return "this package may import the standard library only"
		}
		return ""
	}
	target, project := relative(imp)
	if !project {
		if r.stdlib && !isStdlib(imp) {
			return "this package may import the standard library only"
		}
		return ""
	}
	if r.anything {
		return ""
	}
	tr, known := lookup(table, target)
	switch {
	case r.restricted:
		if slices.Contains(r.only, target) {
			return ""
		}
		if len(r.only) == 0 {
			return "this package may import no other project package"
		}
		return fmt.Sprintf("this package may import only %s of the project", strings.Join(r.only, ", "))
	case slices.Contains(r.also, target):
		return ""
	case !known:
		return fmt.Sprintf("%s has no layer in the archtest table", relOrRoot(target))
	case tr.layer >= r.layer:
		return fmt.Sprintf("layer %d may import only lower layers, and %s is layer %d (imports point downward: docs/ARCHITECTURE.md §2)",
			r.layer, relOrRoot(target), tr.layer)
	}
	return ""
}

func relOrRoot(rel string) string {
	if rel == "" {
		return "the module root package"
	}
	return rel
}

// listPackages runs `go list` on every package of the module.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list packages: %v", err)
	}
	cmd := exec.Command(gotool, "list", "-e", "-json=ImportPath,Imports,Error", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestImportDirection enforces docs/ARCHITECTURE.md §2 on the module's packages (the
// imports of their non-test files).
func TestImportDirection(t *testing.T) {
	pkgs := listPackages(t)
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	for _, p := range pkgs {
		if p.Error != nil {
			// Another test reports broken packages; check what was read.
			t.Logf("%s: %s (imports checked as far as they were read)", p.ImportPath, p.Error.Err)
		}
	}
	for _, v := range check(layers, pkgs) {
		t.Error(v)
	}
}

// TestCheckerCatchesViolations runs the checker on fabricated import lists,
// so a checker that silently passes everything cannot go unnoticed.
func TestCheckerCatchesViolations(t *testing.T) {
	p := func(path string, imports ...string) pkg {
		full := make([]string, len(imports))
		for i, imp := range imports {
			if strings.Contains(imp, ".") || strings.HasPrefix(imp, "std:") {
				full[i] = strings.TrimPrefix(imp, "std:")
			} else {
				full[i] = module + "/" + imp
			}
		}
		return pkg{ImportPath: module + "/" + path, Imports: full}
	}
	tests := []struct {
		name string
		pkg  pkg
		// want is a substring of the single expected violation; empty
		// means the package is fine.
		want string
	}{
		{"upward import", p("message", "instance"), "message imports " + module + "/instance: layer 0 may import only lower layers, and instance is layer 1"},
		{"same layer", p("serialize", "store"), "serialize imports " + module + "/store: layer 6"},
		{"command reaches executor", p("command", "executor"), "command imports " + module + "/executor"},
		{"machine reaches durable", p("machine", "durable"), "durable is layer 7"},
		{"library imports adapter", p("machine", "llm/scripted"), "llm/scripted is layer 90"},
		{"msgpack outside serialize", p("machine", msgpack), "only serialize may import msgpack"},
		{"msgpack subpackage outside serialize", p("durable", msgpack+"/msgpcode"), "only serialize may import msgpack"},
		{"msgpack from an example", p("examples/approval", msgpack), "only serialize may import msgpack"},
		{"store imports project", p("store", "message"), "store imports " + module + "/message: this package may import no other project package"},
		{"store imports third party", p("store", "github.com/google/uuid"), "standard library only"},
		{"store subpackage imports machine", p("store/sqlite", "machine"), "may import only store, internal/livehub, store/internal/backend of the project"},
		{"message imports third party", p("message", "github.com/google/uuid"), "standard library only"},
		{"adapter imports instance", p("llm/anthropic", "instance"), "may import only llm, message, llm/internal/adapter of the project"},
		{"llmtest imports fakeapi", p("llm/llmtest", "llm/internal/fakeapi"), "may import only llm, message of the project"},
		{"fakeapi imports instance", p("llm/internal/fakeapi", "instance"), "may import only llm, message, llm/llmtest of the project"},
		{"library imports fakeapi", p("machine", "llm/internal/fakeapi"), "llm/internal/fakeapi is layer 90"},
		{"unknown package", p("newpkg", "std:fmt"), "package newpkg has no layer: add it to the layers table"},
		{"unknown internal package", p("internal/cache"), "package internal/cache has no layer"},
		{"import of an unknown package", p("machine", "secret"), "secret has no layer"},
		{"root package", pkg{ImportPath: module}, "the module root package has no layer"},

		{"downward imports", p("machine", "executor", "node", "command", "instance", "llm", "message", "internal/frame", "std:fmt", "github.com/looplab/fsm"), ""},
		{"llm imports message", p("llm", "message", "std:context"), ""},
		{"frame imports instance", p("internal/frame", "instance", "llm", "message", "github.com/google/jsonschema-go/jsonschema"), ""},
		{"serialize imports msgpack", p("serialize", "machine", msgpack), ""},
		{"durable imports store", p("durable", "machine", "serialize", "store"), ""},
		{"storetest imports store", p("store/storetest", "store", "std:testing", "github.com/google/go-cmp/cmp"), ""},
		{"store driver", p("store/sqlite", "store", "modernc.org/sqlite"), ""},
		{"adapter", p("llm/openai", "llm", "message", "github.com/openai/openai-go/v3"), ""},
		{"fakeapi", p("llm/internal/fakeapi", "llm", "message", "llm/llmtest", "std:testing", "github.com/stretchr/testify/require"), ""},
		{"llmtest", p("llm/llmtest", "llm", "message", "std:testing", "github.com/google/go-cmp/cmp"), ""},
		{"command line", p("cmd/markov", "durable", "llm/anthropic", "store/sqlite"), ""},
		{"example", p("examples/research", "machine", "llm/scripted"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := check(layers, []pkg{tt.pkg})
			if tt.want == "" {
				if len(got) != 0 {
					t.Fatalf("want no violation, got %q", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tt.want) {
				t.Fatalf("want one violation containing %q, got %q", tt.want, got)
			}
		})
	}
}

// TestLayersTable checks the table itself: every name in also and only is
// a package of the table, and exceptions point at most one layer sideways.
func TestLayersTable(t *testing.T) {
	for name, r := range layers {
		for _, dep := range append(slices.Clone(r.also), r.only...) {
			dr, ok := lookup(layers, dep)
			if !ok {
				t.Errorf("%s: allowed import %s is not in the table", name, dep)
				continue
			}
			if !r.restricted && dr.layer > r.layer {
				t.Errorf("%s (layer %d): exception %s points upward (layer %d)", name, r.layer, dep, dr.layer)
			}
		}
	}
}
