package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// errorPackages are the library packages whose errors follow the
// convention: every sentinel (a package-level Err… variable) and every
// error type (a type named …Error, or one with an Error method) is
// declared in the package's errors.go, and every sentinel's message starts
// with the package name.
var errorPackages = []string{
	"message", "llm", "instance", "command", "node", "executor", "machine",
	"serialize", "store", "standing", "durable", "resumehttp", "a2a",
}

// statuses are error types that carry a status, not a failure; they live
// with the API they belong to.
var statuses = map[string]bool{
	// instance.SuspendRequest: a handler returns it to suspend.
	"the Error method of SuspendRequest": true,
}

func TestErrorsLiveInErrorsGo(t *testing.T) {
	for _, pkg := range errorPackages {
		dir := filepath.Join("..", "..", pkg)
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			for _, v := range errorDecls(t, path) {
				if filepath.Base(path) != "errors.go" && !statuses[v.name] {
					t.Errorf("%s: %s is declared in %s, not errors.go", pkg, v.name, filepath.Base(path))
				}
				if v.msg != "" && !strings.HasPrefix(v.msg, filepath.Base(pkg)+": ") {
					t.Errorf("%s: %s's message %q does not start with %q", pkg, v.name, v.msg, filepath.Base(pkg)+": ")
				}
			}
		}
	}
}

// errorDecl is a sentinel or an error type; msg is a sentinel's message.
type errorDecl struct{ name, msg string }

// errorDecls returns the sentinels and error types the file declares.
func errorDecls(t *testing.T, path string) []errorDecl {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), path, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []errorDecl
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for i, n := range s.Names {
						if !strings.HasPrefix(n.Name, "Err") || i >= len(s.Values) {
							continue
						}
						out = append(out, errorDecl{n.Name, newMessage(s.Values[i])})
					}
				case *ast.TypeSpec:
					if strings.HasSuffix(s.Name.Name, "Error") {
						out = append(out, errorDecl{name: s.Name.Name})
					}
				}
			}
		case *ast.FuncDecl:
			if d.Recv != nil && d.Name.Name == "Error" {
				out = append(out, errorDecl{name: "the Error method of " + recvName(d.Recv.List[0].Type)})
			}
		}
	}
	return out
}

// newMessage returns the message of errors.New("…"), or "".
func newMessage(e ast.Expr) string {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return ""
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "New" {
		return ""
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok {
		return ""
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		return ""
	}
	return s
}

// recvName is the name of a method receiver's type.
func recvName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}
