// Package doccheck keeps the project's Markdown honest: the Go code a
// guide quotes is cut from compiled, tested files, and every relative link
// resolves. It is imported only by tests.
//
// A quoted block is a fenced block right after a marker comment naming a
// file (relative to the repository's root) and a region of it:
//
//	<!-- code: examples/deadlines/main.go#charter -->
//	```go
//	…
//	```
//
// The region is the lines between the file's "// charter:begin" and
// "// charter:end" comments (every such pair, in order), dedented by the
// markers' indentation, with runs of blank lines collapsed to one; other
// regions' markers inside it are left out, so regions may nest. A name may
// hold colons: "// deadlines:tool:begin" opens the region "deadlines:tool".
package doccheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// ErrNoRegion is returned when a file has no region of the name asked for.
var ErrNoRegion = errors.New("doccheck: no such region")

// Region returns the region name of the Go source src: the lines between
// "// name:begin" and "// name:end" marker comments, in order, dedented by
// the markers' indentation, with runs of blank lines collapsed to one. It
// fails with ErrNoRegion when src has no such markers.
func Region(src, name string) (string, error) {
	var b strings.Builder
	begin, end := "// "+name+":begin", "// "+name+":end"
	indent, in, blank, found := "", false, true, false
	for line := range strings.Lines(src) {
		trim := strings.TrimSpace(line)
		switch {
		case trim == begin:
			in, found, indent = true, true, line[:strings.Index(line, "//")]
		case trim == end:
			in = false
		case marker.MatchString(trim):
			// another region's marker: regions may nest and overlap
		case in && trim == "":
			if !blank {
				b.WriteString("\n")
			}
			blank = true
		case in:
			b.WriteString(strings.TrimPrefix(line, indent))
			blank = false
		}
	}
	if !found {
		return "", fmt.Errorf("%w %q", ErrNoRegion, name)
	}
	return strings.TrimRight(b.String(), "\n") + "\n", nil
}

// marker is a region's marker comment.
var marker = regexp.MustCompile(`^// [\w-]+(:[\w-]+)*:(begin|end)$`)

// quoted finds a marker comment and the fenced block after it.
var quoted = regexp.MustCompile("(?m)^<!-- code: ([^#\\s]+)#([\\w:-]+) -->\n```go\n((?s:.*?))```")

// Quote is one quoted block of a Markdown file.
type Quote struct {
	File, Region string // what the marker names
	Got, Want    string // the block as written; the region as the file has it
}

// Quotes returns the quoted blocks of the Markdown text md, each with the
// region it names read from root (the repository's root).
func Quotes(root, md string) ([]Quote, error) {
	var out []Quote
	for _, m := range quoted.FindAllStringSubmatch(md, -1) {
		src, err := os.ReadFile(filepath.Join(root, m[1]))
		if err != nil {
			return nil, err
		}
		want, err := Region(string(src), m[2])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m[1], err)
		}
		out = append(out, Quote{File: m[1], Region: m[2], Got: m[3], Want: want})
	}
	return out, nil
}

// Requote returns md with every quoted block replaced by the region it
// names, read from root.
func Requote(root, md string) (string, error) {
	var err error
	out := quoted.ReplaceAllStringFunc(md, func(block string) string {
		m := quoted.FindStringSubmatch(block)
		src, rerr := os.ReadFile(filepath.Join(root, m[1]))
		if rerr != nil {
			err = rerr
			return block
		}
		want, rerr := Region(string(src), m[2])
		if rerr != nil {
			err = fmt.Errorf("%s: %w", m[1], rerr)
			return block
		}
		return "<!-- code: " + m[1] + "#" + m[2] + " -->\n```go\n" + want + "```"
	})
	return out, err
}

// GoBlocks counts the fenced Go blocks of md, and how many of them are
// quoted (follow a marker comment).
func GoBlocks(md string) (all, quotedBlocks int) {
	return strings.Count(md, "\n```go\n"), len(quoted.FindAllStringIndex(md, -1))
}

// link is a Markdown inline link or image: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// fence matches a fenced block, whose text holds no links.
var fence = regexp.MustCompile("(?ms)^```.*?^```")

// BrokenLinks returns the relative links of the Markdown file path (under
// root) that point to no file, or to a heading its Markdown target lacks,
// each as "target: why". Links with a scheme (https:, mailto:) are not
// followed.
func BrokenLinks(root, path string) ([]string, error) {
	md, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return nil, err
	}
	var broken []string
	for _, m := range link.FindAllStringSubmatch(fence.ReplaceAllString(string(md), ""), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		full := filepath.Join(root, path)
		if file != "" {
			full = filepath.Join(root, filepath.Dir(path), file)
		}
		if _, err := os.Stat(full); err != nil {
			broken = append(broken, target+": no such file")
			continue
		}
		if anchor == "" {
			continue
		}
		if !strings.HasSuffix(full, ".md") {
			broken = append(broken, target+": an anchor in a file that is not Markdown")
			continue
		}
		text, err := os.ReadFile(full)
		if err != nil {
			return nil, err
		}
		if !hasAnchor(string(text), anchor) {
			broken = append(broken, target+": no such heading")
		}
	}
	return broken, nil
}

// hasAnchor reports whether a heading of md has the anchor GitHub gives it.
func hasAnchor(md, anchor string) bool {
	seen := map[string]int{}
	for line := range strings.Lines(fence.ReplaceAllString(md, "")) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		slug := Slug(strings.TrimLeft(strings.TrimSpace(line), "#"))
		n := seen[slug]
		seen[slug]++
		if n > 0 {
			slug = fmt.Sprintf("%s-%d", slug, n)
		}
		if slug == anchor {
			return true
		}
	}
	return false
}

// Slug returns the anchor GitHub gives a heading's text: lower case,
// spaces as hyphens, letters, digits, hyphens and underscores kept, every
// other character dropped.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
