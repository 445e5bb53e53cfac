package resumehttp

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func TestPreferWait(t *testing.T) {
	for _, c := range []struct {
		headers []string
		want    int64
		ok      bool
	}{
		{nil, 0, false},
		{[]string{"wait=5"}, 5, true},
		{[]string{"respond-async, wait=10"}, 10, true},
		{[]string{"WAIT = 7 ; foo=bar"}, 7, true},
		{[]string{`wait="12"`}, 12, true},
		{[]string{`handling=lenient, x="a,wait=3"`, "wait=4"}, 4, true}, // a quoted comma splits nothing
		{[]string{"wait=1, wait=9"}, 1, true},                           // the first counts
		{[]string{"wait=99999999999999999999999"}, maxPreferWait, true},
		{[]string{"wait=-1"}, 0, false},
		{[]string{"wait=1.5"}, 0, false},
		{[]string{"wait="}, 0, false},
		{[]string{"wait"}, 0, false},
		{[]string{"waited=3"}, 0, false},
		{[]string{"wait=0x10"}, 0, false},
	} {
		h := http.Header{}
		for _, v := range c.headers {
			h.Add("Prefer", v)
		}
		n, ok := preferWait(h)
		if n != c.want || ok != c.ok {
			t.Errorf("preferWait(%q) = %d, %v; want %d, %v", c.headers, n, ok, c.want, c.ok)
		}
	}
}

// FuzzPreferWait feeds any Prefer header to the parser: it never panics,
// a wait it finds is within [0, 2^31], and a header that is a plain
// wait=N gives N.
func FuzzPreferWait(f *testing.F) {
	for _, s := range []string{"wait=5", "respond-async, wait=10", `wait="3"`, "wait=-1", `x="\"", wait=2`,
		"wait=99999999999999999999", ";;,,=", `"`, "wait=\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, ok := preferWait(http.Header{"Prefer": {v}})
		if ok && (n < 0 || n > maxPreferWait) {
			t.Fatalf("preferWait(%q) = %d", v, n)
		}
		if !ok && n != 0 {
			t.Fatalf("preferWait(%q) = %d, false", v, n)
		}
		if d, found := strings.CutPrefix(v, "wait="); found {
			if want, err := strconv.ParseInt(d, 10, 64); err == nil && want >= 0 && want <= maxPreferWait && d[0] != '+' {
				if n != want || !ok {
					t.Fatalf("preferWait(%q) = %d, %v; want %d", v, n, ok, want)
				}
			}
		}
	})
}

func TestIdempotencyKey(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   string
		bad    bool
	}{
		{nil, "", false},
		{[]string{"k1"}, "k1", false},
		{[]string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`}, "8e03978e-40d5-43e8-bc93-6894a57f9324", false},
		{[]string{"a.b:c~d_e"}, "a.b:c~d_e", false},
		{[]string{strings.Repeat("k", MaxIdempotencyKeyLen)}, strings.Repeat("k", MaxIdempotencyKeyLen), false},
		{[]string{strings.Repeat("k", MaxIdempotencyKeyLen+1)}, "", true},
		{[]string{""}, "", true},
		{[]string{`""`}, "", true},
		{[]string{"a b"}, "", true},
		{[]string{"a/b"}, "", true},
		{[]string{"é"}, "", true},
		{[]string{"k1", "k2"}, "", true},
	} {
		h := http.Header{"Idempotency-Key": c.values}
		got, err := idempotencyKey(h)
		if got != c.want || (err != nil) != c.bad || err != nil && !errors.Is(err, ErrBadIdempotencyKey) {
			t.Errorf("idempotencyKey(%q) = %q, %v", c.values, got, err)
		}
	}
}
