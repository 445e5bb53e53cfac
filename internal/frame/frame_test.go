package frame

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type inner struct {
	Tags []string
	when time.Time
}

type rich struct {
	Items  []int
	Meta   map[string]any
	Ptr    *inner
	Any    any
	Arr    [2][]string
	Nested inner
	At     time.Time
}

func TestDeepCopy(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	orig := rich{
		Items:  []int{1, 2},
		Meta:   map[string]any{"k": []string{"v"}, "t": at},
		Ptr:    &inner{Tags: []string{"a"}},
		Any:    map[string]int{"n": 1},
		Arr:    [2][]string{{"x"}, nil},
		Nested: inner{Tags: []string{"b"}, when: at},
		At:     at,
	}
	cp := ClonerFor[rich]()(orig).(rich)
	if d := cmp.Diff(orig, cp, cmp.AllowUnexported(inner{})); d != "" {
		t.Fatalf("copy differs:\n%s", d)
	}
	cp.Items[0] = 9
	cp.Meta["k"].([]string)[0] = "changed"
	cp.Ptr.Tags[0] = "changed"
	cp.Any.(map[string]int)["n"] = 2
	cp.Arr[0][0] = "changed"
	cp.Nested.Tags[0] = "changed"
	if orig.Items[0] != 1 || orig.Meta["k"].([]string)[0] != "v" || orig.Ptr.Tags[0] != "a" ||
		orig.Any.(map[string]int)["n"] != 1 || orig.Arr[0][0] != "x" || orig.Nested.Tags[0] != "b" {
		t.Fatalf("copy shares memory with the original: %+v", orig)
	}
	if _, ok := cp.Meta["t"].(time.Time); !ok {
		t.Fatalf("time inside any lost its type: %T", cp.Meta["t"])
	}
}

func TestPlainTypesAreNotCopied(t *testing.T) {
	type flat struct {
		N int
		S string
		A [3]float64
	}
	if !plain(reflect.TypeFor[flat](), 0) {
		t.Fatal("flat struct should be plain")
	}
	if plain(reflect.TypeFor[rich](), 0) || plain(reflect.TypeFor[time.Time](), 0) {
		t.Fatal("types with references are not plain")
	}
	if DeepCopy(nil) != nil {
		t.Fatal("DeepCopy(nil) != nil")
	}
}

func TestCyclicValuesTerminate(t *testing.T) {
	type node struct{ Next *node }
	n := &node{}
	n.Next = n
	if DeepCopy(n) == nil {
		t.Fatal("nil copy")
	}
}
