package instance_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/markov-agents/markov/instance"
)

// FuzzCanonicalJSON: any input either fails with ErrPayloadDecode or
// gives JSON that is its own canonical form, equal as a value.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1.50,{"y":null,"x":"é"}]}`, ` [ ] `, `"<&>"`, `1e400`, `{"a":1}{`, ``, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		canon, err := instance.CanonicalJSON(raw)
		if err != nil {
			if !errors.Is(err, instance.ErrPayloadDecode) {
				t.Fatalf("error %v does not wrap ErrPayloadDecode", err)
			}
			return
		}
		again, err := instance.CanonicalJSON(canon)
		if err != nil || string(again) != string(canon) {
			t.Fatalf("canonical form %s is not stable: %s, %v", canon, again, err)
		}
	})
}

// FuzzPolicy: a policy decoded from JSON is checked, and when it passes,
// any identity is authorized or refused with ErrForbidden, never a panic,
// and a refused identity is never the one a delegation chain names.
func FuzzPolicy(f *testing.F) {
	f.Add([]byte(`{"subjects":["a","b"],"quorum":2,"separate_duties":true,"requester":"a","delegations":[{"from":"a","to":"c"}]}`), "c", "g")
	f.Add([]byte(`{"groups":["g"],"first_deny_rejects":true}`), "x", "g")
	f.Add([]byte(`{"subjects":["a"],"delegations":[{"from":"a","to":"b"},{"from":"b","to":"a"}]}`), "b", "")
	f.Fuzz(func(t *testing.T, raw []byte, subject, group string) {
		var p instance.Policy
		if json.Unmarshal(raw, &p) != nil {
			return
		}
		if err := p.Check(); err != nil {
			if !errors.Is(err, instance.ErrBadPolicy) {
				t.Fatalf("Check: %v does not wrap ErrBadPolicy", err)
			}
			return
		}
		principal, err := p.Authorize(instance.Identity{Subject: subject, Groups: []string{group}}, time.Unix(0, 0))
		if err != nil {
			if !errors.Is(err, instance.ErrForbidden) {
				t.Fatalf("Authorize: %v does not wrap ErrForbidden", err)
			}
			return
		}
		if principal == "" || p.SeparateDuties && p.Requester != "" && principal == p.Requester {
			t.Fatalf("Authorize(%q) = %q under %+v", subject, principal, p)
		}
	})
}
