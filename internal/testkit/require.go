package testkit

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// InCI reports whether the tests run in CI: the CI environment variable is
// set to anything but a false value ("false", "0").
func InCI() bool {
	v := os.Getenv("CI")
	if b, err := strconv.ParseBool(v); err == nil {
		return b
	}
	return v != ""
}

// Require stops tb when something it needs outside Go is missing (err is
// not nil): Node packages, Chromium, a PostgreSQL database. On a
// developer's machine the test skips; in CI (InCI), where .ci/run installs
// everything, it fails. The message names what is missing and the one
// command, how, that provides it.
func Require(tb testing.TB, err error, what, how string) {
	tb.Helper()
	if err == nil {
		return
	}
	if InCI() {
		tb.Fatalf("%s is missing (%v); CI must provide it: %s", what, err, how)
	} else {
		tb.Skipf("%s is missing (%v); to run this test: %s", what, err, how)
	}
}

// Chromium is the path of Debian's chromium, for the browser tests
// (chromedp). Without one tb stops as Require says: it skips, or fails
// in CI.
func Chromium(tb testing.TB) string {
	tb.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("chromium")
	Require(tb, err, "chromium", "apt-get install -y chromium (or .ci/run)")
	return p
}
