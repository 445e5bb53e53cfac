package durabletest

import "testing"

// FuzzParsePoint: a child's "point" line parses to a point that says
// itself back as the same line, or not at all; nothing panics.
func FuzzParsePoint(f *testing.F) {
	for _, seed := range []string{"point before-save 3", "point effect-started 1", "point effect-tx 2", "point during-save", "stopped", "point  7", "point after-save -1 x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		p, ok := parsePoint(line)
		if !ok {
			return
		}
		again, ok := parsePoint("point " + p.String())
		if !ok || again != p {
			t.Fatalf("%q parses to %+v, which says itself back as %+v (%v)", line, p, again, ok)
		}
	})
}
