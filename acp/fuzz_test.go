package acp_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/markov-agents/markov/acp"
)

// FuzzDecodeSuspendRequest checks that the params of session/suspend
// either decode to a request the agent can honour — which encodes and
// decodes to itself — or fail with ErrInvalidParams, never panic.
func FuzzDecodeSuspendRequest(f *testing.F) {
	for _, seed := range []string{
		`{"sessionId":"m_1"}`,
		`{"sessionId":"m_1","reason":"review","mode":"interrupt_immediate"}`,
		`{"sessionId":"m_1","mode":"wait_for_completion","resumeWhen":{"onEvent":"ci.passed","timeout":{"durationMinutes":60,"onTimeout":"resume_with_summary"}}}`,
		`{"sessionId":"m_1","resumeWhen":{"trigger":{"event":"x"},"timeout":{"durationMinutes":0.5,"onTimeout":"resume_with_input","input":{"ok":true}}}}`,
		`{"sessionId":"m_1","mode":"later"}`,
		`{"sessionId":"m_1","resumeWhen":{"timeout":{"durationMinutes":-1}}}`,
		`{"sessionId":"m_1","resumeWhen":{"trigger":{"cron":"* * * * *"}}}`,
		`{"sessionId":""}`, `{"sessionId":"m"} {}`, `[]`, `null`, ``, `{"sessionId":1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := acp.DecodeSuspendRequest(data)
		if err != nil {
			if !errors.Is(err, acp.ErrInvalidParams) {
				t.Fatalf("error %v does not wrap ErrInvalidParams", err)
			}
			return
		}
		if r.SessionID == "" || r.Mode == "" || r.ResumeWhen.Check() != nil {
			t.Fatalf("accepted a request it cannot honour: %+v", r)
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := acp.DecodeSuspendRequest(again)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
		if d := cmp.Diff(r, r2); d != "" {
			t.Fatalf("round trip changed the request (-first +second):\n%s", d)
		}
	})
}

// FuzzDecodeResumeRequest checks the params of the RFC's session/resume
// the same way.
func FuzzDecodeResumeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"sessionId":"m_1"}`,
		`{"sessionId":"m_1","handle":"h","input":{"text":"blue"},"continueTranscript":false}`,
		`{"sessionId":"m_1","input":"carry on"}`,
		`{"sessionId":"m_1","continueTranscript":"no"}`,
		`{}`, `7`, `{"sessionId":"m_1"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := acp.DecodeResumeRequest(data)
		if err != nil {
			if !errors.Is(err, acp.ErrInvalidParams) {
				t.Fatalf("error %v does not wrap ErrInvalidParams", err)
			}
			return
		}
		if r.SessionID == "" {
			t.Fatalf("accepted a request without a session: %+v", r)
		}
		if len(r.Input) > 0 && !json.Valid(r.Input) {
			t.Fatalf("accepted an input that is not JSON: %q", r.Input)
		}
	})
}

// FuzzYesNo checks that YesNo never panics and only says yes-no for a
// schema that is JSON.
func FuzzYesNo(f *testing.F) {
	for _, seed := range []string{
		`{"type":"boolean"}`,
		`{"type":"object","properties":{"approved":{"type":"boolean"},"manager":{"type":"string"}},"required":["approved","manager"]}`,
		`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"boolean"}}}`,
		`{"type":"object","properties":{"n":{"type":"integer"},"ok":{"type":"boolean"}},"required":["n"]}`,
		`{"type":["boolean","null"]}`, `{"type":"object","properties":{"x":null}}`, `{}`, `true`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, ok := acp.YesNo(data); ok && !json.Valid(data) {
			t.Fatalf("a yes-no schema that is not JSON: %q", data)
		}
	})
}
