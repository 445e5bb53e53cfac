package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// isInternal reports whether path is an internal package of module mod:
// one with an "internal" element, which code outside the module cannot
// import. (Other modules' internal types reached through their public
// aliases are their business.)
func isInternal(mod, path string) bool {
	rest, ok := strings.CutPrefix(path, mod+"/")
	return ok && slices.Contains(strings.Split(rest, "/"), "internal")
}

// exposer finds the internal types the exported API of one package
// mentions.
type exposer struct {
	mod  string
	pkg  *types.Package
	seen map[types.Type]bool // per identifier: unexported types looked into
	out  []string
}

// exposures returns one line per exported identifier of pkg (a function,
// variable, constant, type, exported field or method) whose type mentions
// a type of an internal package of module mod.
func exposures(mod string, pkg *types.Package) []string {
	x := &exposer{mod: mod, pkg: pkg}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		where := pkg.Path() + "." + name
		tn, ok := obj.(*types.TypeName)
		if !ok {
			x.check(where, obj.Type())
			continue
		}
		if tn.IsAlias() {
			x.check(where, types.Unalias(tn.Type()))
			continue
		}
		named, ok := tn.Type().(*types.Named)
		if !ok {
			continue
		}
		x.typeParams(where, named.TypeParams())
		x.underlying(where, named.Underlying())
		for m := range named.Methods() {
			if m.Exported() {
				x.check(where+"."+m.Name(), m.Type())
			}
		}
	}
	return x.out
}

// check reports where when t mentions an internal type.
func (x *exposer) check(where string, t types.Type) {
	x.seen = map[types.Type]bool{}
	if path := x.mention(t); path != "" {
		x.out = append(x.out, fmt.Sprintf("%s mentions internal package %s", where, path))
	}
}

// underlying checks the exported parts of a declared type: the fields of
// a struct, the methods of an interface, or the type itself.
func (x *exposer) underlying(where string, t types.Type) {
	switch u := t.(type) {
	case *types.Struct:
		for f := range u.Fields() {
			if f.Exported() {
				x.check(where+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for m := range u.ExplicitMethods() {
			if m.Exported() {
				x.check(where+"."+m.Name(), m.Type())
			}
		}
		for e := range u.EmbeddedTypes() {
			x.check(where, e)
		}
	default:
		x.check(where, t)
	}
}

func (x *exposer) typeParams(where string, tps *types.TypeParamList) {
	for tp := range tps.TypeParams() {
		x.check(where+"["+tp.Obj().Name()+"]", tp.Constraint())
	}
}

// mention returns the path of an internal package whose type t mentions,
// or "". Unexported types of the package itself are looked into: what an
// exported identifier hands out through them is exposed too.
func (x *exposer) mention(t types.Type) string {
	if n, ok := t.(*types.Named); ok {
		return x.named(n)
	}
	for _, c := range parts(t) {
		if p := x.mention(c); p != "" {
			return p
		}
	}
	return ""
}

// parts returns the types t is built from, as far as code outside its
// package sees them: exported fields and methods only.
func parts(t types.Type) []types.Type {
	var out []types.Type
	switch t := t.(type) {
	case *types.Alias:
		out = append(out, types.Unalias(t))
	case *types.Map:
		out = append(out, t.Key(), t.Elem())
	case interface{ Elem() types.Type }: // pointer, slice, array, channel
		out = append(out, t.Elem())
	case *types.Signature:
		for _, tuple := range []*types.Tuple{t.Params(), t.Results()} {
			for v := range tuple.Variables() {
				out = append(out, v.Type())
			}
		}
	case *types.Struct, *types.Interface:
		out = members(t)
	case *types.Union:
		for i := range t.Len() {
			out = append(out, t.Term(i).Type())
		}
	case *types.TypeParam:
		out = append(out, t.Constraint())
	}
	return out
}

func (x *exposer) named(t *types.Named) string {
	obj := t.Obj()
	if obj.Pkg() != nil && isInternal(x.mod, obj.Pkg().Path()) {
		return obj.Pkg().Path()
	}
	for arg := range t.TypeArgs().Types() {
		if p := x.mention(arg); p != "" {
			return p
		}
	}
	if obj.Pkg() == x.pkg && !obj.Exported() && !x.seen[t] {
		x.seen[t] = true
		return x.mention(t.Underlying())
	}
	return ""
}

// members returns the types of the exported fields of a struct, or of the
// exported methods and embedded types of an interface.
func members(t types.Type) []types.Type {
	var out []types.Type
	if s, ok := t.(*types.Struct); ok {
		for f := range s.Fields() {
			if f.Exported() {
				out = append(out, f.Type())
			}
		}
		return out
	}
	i := t.(*types.Interface)
	for m := range i.Methods() {
		if m.Exported() {
			out = append(out, m.Type())
		}
	}
	return slices.AppendSeq(out, i.EmbeddedTypes())
}

// exported is what go list says of a package for the export check.
type exported struct {
	ImportPath string
	Name       string
	Export     string
	DepOnly    bool
	Error      *struct{ Err string }
}

// exportData lists the module's packages with go list and returns where
// the export data of every package they need is, and the public packages
// (not internal, not commands) that have some.
func exportData(t *testing.T) (files map[string]string, public []string) {
	t.Helper()
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list packages: %v", err)
	}
	cmd := exec.Command(gotool, "list", "-e", "-export", "-deps", "-json=ImportPath,Name,Export,DepOnly,Error", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	files = map[string]string{}
	for dec := json.NewDecoder(bytes.NewReader(data)); ; {
		var p exported
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		if p.Error != nil {
			// The build reports broken packages; check the others.
			t.Logf("%s: %s (not checked)", p.ImportPath, p.Error.Err)
			continue
		}
		files[p.ImportPath] = p.Export
		if _, ours := relative(p.ImportPath); ours && !p.DepOnly && p.Name != "main" && p.Export != "" && !isInternal(module, p.ImportPath) {
			public = append(public, p.ImportPath)
		}
	}
	return files, public
}

// TestNoInternalTypesInPublicAPI fails when an exported identifier of a
// package that code outside the module can import mentions a type of an
// internal package: such a value cannot be named, and may hand out
// plumbing meant to stay hidden. It reads the compiled export data of
// every package, so it sees the API as users' code does.
func TestNoInternalTypesInPublicAPI(t *testing.T) {
	files, public := exportData(t)
	if len(public) == 0 {
		t.Fatal("go list found no public packages")
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if files[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(files[path])
	})
	for _, path := range public {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		for _, e := range exposures(module, pkg) {
			t.Error(e)
		}
	}
}

// TestExposuresCatchesInternalTypes runs the check on a fabricated
// package, so a check that silently passes everything cannot go
// unnoticed.
func TestExposuresCatchesInternalTypes(t *testing.T) {
	sources := map[string]string{
		"m/internal/x": `package x; type T int; type G[P any] struct{ V P }`,
		"m/pub": `package pub
import "m/internal/x"
func F() x.T { return 0 }
func Fine(int) string { return "" }
var V []map[string]*x.T
type S struct { Field x.T; hidden x.T; Ok int }
func (S) M(func(x.T)) {}
func (S) unexported(x.T) {}
type I interface { N() chan x.T; Fine() }
type A = x.T
type K[P interface{ ~[]x.T }] struct{}
type W struct{ G x.G[int] }
func Hidden() hidden { return hidden{} }
type hidden struct{ Out x.T }
type Generic[P any] struct{ V P }
func Inst() Generic[x.T] { return Generic[x.T]{} }
`,
	}
	pkgs := map[string]*types.Package{}
	fset := token.NewFileSet()
	var conf types.Config
	conf.Importer = importerFunc(func(path string) (*types.Package, error) { return pkgs[path], nil })
	for _, path := range []string{"m/internal/x", "m/pub"} {
		f, err := parser.ParseFile(fset, path+".go", sources[path], 0)
		if err != nil {
			t.Fatal(err)
		}
		pkg, err := conf.Check(path, fset, []*ast.File{f}, nil)
		if err != nil {
			t.Fatal(err)
		}
		pkgs[path] = pkg
	}
	got := exposures("m", pkgs["m/pub"])
	var names []string
	for _, g := range got {
		name, _, _ := strings.Cut(g, " ")
		names = append(names, name)
	}
	want := []string{"m/pub.A", "m/pub.F", "m/pub.Hidden", "m/pub.I.N", "m/pub.Inst", "m/pub.K[P]", "m/pub.S.Field", "m/pub.S.M", "m/pub.V", "m/pub.W.G"}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("exposures = %q, want %q", names, want)
	}
	if len(exposures("m", pkgs["m/internal/x"])) != 0 {
		t.Error("an internal package's own API is no exposure")
	}
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
