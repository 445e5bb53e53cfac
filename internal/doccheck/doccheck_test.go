package doccheck_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/internal/doccheck"
)

var update = flag.Bool("update", false, "rewrite the docs' quoted blocks from the files they quote")

// root is the repository's root, from this package's directory.
const root = "../.."

// docs returns the Markdown files the project publishes: the README, the
// examples' gallery and every file of docs/.
func docs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	out := []string{"README.md", "examples/README.md"}
	for _, f := range files {
		rel, err := filepath.Rel(root, f)
		require.NoError(t, err)
		out = append(out, rel)
	}
	return out
}

// guides are the docs whose every Go block must be quoted from compiled
// code.
var guides = []string{
	"docs/first-agent.md", "docs/approvals.md", "docs/multi-node.md", "docs/deployment.md",
	"docs/events-and-uis.md", "docs/protocols.md", "docs/testing.md",
}

// TestDocsQuoteCompiledCode: every quoted block of the docs is the region
// of the file it names, as that file has it now.
func TestDocsQuoteCompiledCode(t *testing.T) {
	for _, path := range docs(t) {
		md, err := os.ReadFile(filepath.Join(root, path))
		require.NoError(t, err)
		if *update {
			out, err := doccheck.Requote(root, string(md))
			require.NoError(t, err, path)
			require.NoError(t, os.WriteFile(filepath.Join(root, path), []byte(out), 0o644))
			continue
		}
		quotes, err := doccheck.Quotes(root, string(md))
		require.NoError(t, err, path)
		for _, q := range quotes {
			require.Equal(t, q.Want, q.Got, "%s quotes %s#%s as it no longer is; go test ./internal/doccheck -update rewrites it", path, q.File, q.Region)
		}
	}
}

// TestGuidesQuoteAllTheirCode: a guide shows no Go that is not compiled.
func TestGuidesQuoteAllTheirCode(t *testing.T) {
	for _, path := range guides {
		md, err := os.ReadFile(filepath.Join(root, path))
		require.NoError(t, err)
		all, quoted := doccheck.GoBlocks(string(md))
		require.Equal(t, all, quoted, "%s: a Go block without a <!-- code: FILE#REGION --> marker", path)
	}
}

// TestLinksResolve: every relative link of the docs points to a file that
// exists, and to a heading that exists when it names one.
func TestLinksResolve(t *testing.T) {
	for _, path := range docs(t) {
		broken, err := doccheck.BrokenLinks(root, path)
		require.NoError(t, err)
		require.Empty(t, broken, "%s has broken links", path)
	}
}

func TestRegion(t *testing.T) {
	src := "package p\n\nfunc f() {\n\t// a:begin\n\tx := 1\n\n\n\ty := 2\n\t// a:end\n\tz := 3\n\t// a:begin\n\t_ = x + y\n\t// a:end\n}\n"
	got, err := doccheck.Region(src, "a")
	require.NoError(t, err)
	require.Equal(t, "x := 1\n\ny := 2\n_ = x + y\n", got)
	nested := "// outer:begin\nfunc f() {\n\t// outer:inner:begin\n\tx := 1\n\t// outer:inner:end\n}\n// outer:end\n"
	got, err = doccheck.Region(nested, "outer")
	require.NoError(t, err)
	require.Equal(t, "func f() {\n\tx := 1\n}\n", got)
	got, err = doccheck.Region(nested, "outer:inner")
	require.NoError(t, err)
	require.Equal(t, "x := 1\n", got)
	_, err = doccheck.Region(src, "b")
	require.True(t, errors.Is(err, doccheck.ErrNoRegion), "%v", err)
}

func TestBrokenLinksFindsAMissingFileAndHeading(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.md"), []byte("# A title\n\n## Deadlines, and what `passes` — §5\n\n```sh\n# not a heading\n```\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.md"), []byte(
		"[ok](a.md) [ok](a.md#a-title) [ok](a.md#deadlines-and-what-passes--5) [ok](#here) [web](https://x.test/y)\n"+
			"[gone](c.md) [gone](a.md#not-a-heading) [gone](#nowhere)\n\n## Here\n"), 0o644))
	broken, err := doccheck.BrokenLinks(dir, "b.md")
	require.NoError(t, err)
	require.Equal(t, []string{"c.md: no such file", "a.md#not-a-heading: no such heading", "#nowhere: no such heading"}, broken)
}

func TestSlug(t *testing.T) {
	require.Equal(t, "5-suspend-and-resume", doccheck.Slug("5. Suspend and resume"))
	require.Equal(t, "acp-markov-in-your-editor", doccheck.Slug("ACP: markov in your editor"))
}

// TestREADMEIsAFrontDoor: the README stays short; detail goes to docs/.
func TestREADMEIsAFrontDoor(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	lines := bytes.Count(readme, []byte("\n"))
	require.LessOrEqual(t, lines, 300, "README.md has %d lines; move detail to a guide in docs/", lines)
}
