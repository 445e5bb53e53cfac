package serialize

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/markov-agents/markov/machine"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// Golden files: testdata/v<N>/<scenario>.{bin,json} hold each scenario
// machine as written by format version N. The current version's files
// must match what Marshal and MarshalJSON write byte for byte (rewrite
// them with go test -update after a deliberate change, which should come
// with a new version); every version's files must keep decoding into the
// scenario machines.

func goldenPath(version int, name, ext string) string {
	return filepath.Join("testdata", fmt.Sprintf("v%d", version), name+ext)
}

func TestGolden(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			m := sc.build(t)
			bin, js := must(Marshal(m)), must(MarshalJSON(m))
			for _, f := range []struct {
				ext  string
				data []byte
			}{{".bin", bin}, {".json", js}} {
				path := goldenPath(Version, sc.name, f.ext)
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, f.data, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test -update to create it)", err)
				}
				if !bytes.Equal(f.data, want) {
					t.Errorf("%s differs from what %s writes now; if the change is deliberate, add a format version (or run go test -update)\n got %q\nwant %q", path, f.ext, f.data, want)
				}
			}
		})
	}
}

// checkPastFile decodes the golden file at path into its scenario
// machine.
func checkPastFile(t *testing.T, path string) {
	name, ext, _ := strings.Cut(filepath.Base(path), ".")
	var build func(testing.TB) *machine.Machine
	for _, sc := range scenarios {
		if sc.name == name {
			build = sc.build
		}
	}
	if build == nil {
		t.Fatalf("no scenario %q", name)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	unmarshal := map[string]func(*machine.Charter, []byte) (*machine.Machine, error){"bin": Unmarshal, "json": UnmarshalJSON}[ext]
	if unmarshal == nil {
		t.Fatalf("unexpected file %s", path)
	}
	got, err := unmarshal(charter(t), data)
	if err != nil {
		t.Fatal(err)
	}
	sameMachine(t, build(t), got)
}

var versionDir = regexp.MustCompile(`^v(\d+)$`)

// TestPastVersions decodes every golden file of every version kept in
// testdata into its scenario machine.
func TestPastVersions(t *testing.T) {
	dirs, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, d := range dirs {
		m := versionDir.FindStringSubmatch(d.Name())
		if m == nil || !d.IsDir() {
			continue
		}
		v, _ := strconv.Atoi(m[1])
		seen[v] = true
		files, err := os.ReadDir(filepath.Join("testdata", d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			t.Run(d.Name()+"/"+f.Name(), func(t *testing.T) {
				checkPastFile(t, filepath.Join("testdata", d.Name(), f.Name()))
			})
		}
	}
	for v := 1; v <= Version; v++ {
		if !seen[v] {
			t.Errorf("testdata/v%d is missing: keep the golden files of every version", v)
		}
	}
}
