package acp_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/markov-agents/markov/acp"
)

// addSeeds adds the seed inputs of a fuzz test.
func addSeeds(f *testing.F, seeds ...string) {
	for _, seed := range seeds {
		f.Add([]byte(seed))
	}
}

// fuzzParams fuzzes a decoder of params: what it refuses must fail with
// ErrInvalidParams, what it accepts goes to check.
func fuzzParams[T any](f *testing.F, decode func(json.RawMessage) (T, error), check func(*testing.T, T)) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decode(data)
		if err != nil {
			if !errors.Is(err, acp.ErrInvalidParams) {
				t.Fatalf("error %v does not wrap ErrInvalidParams", err)
			}
			return
		}
		check(t, r)
	})
}

// FuzzDecodeSuspendRequest checks that the params of session/suspend
// either decode to a request the agent can honour — which encodes and
// decodes to itself — or fail with ErrInvalidParams, never panic.
func FuzzDecodeSuspendRequest(f *testing.F) {
	addSeeds(f,
		`{"sessionId":"m_1"}`,
		`{"sessionId":"m_1","reason":"review","mode":"interrupt_immediate"}`,
		`{"sessionId":"m_1","mode":"wait_for_completion","resumeWhen":{"onEvent":"ci.passed","timeout":{"durationMinutes":60,"onTimeout":"resume_with_summary"}}}`,
		`{"sessionId":"m_1","resumeWhen":{"trigger":{"event":"x"},"timeout":{"durationMinutes":0.5,"onTimeout":"resume_with_input","input":{"ok":true}}}}`,
		`{"sessionId":"m_1","mode":"later"}`,
		`{"sessionId":"m_1","resumeWhen":{"timeout":{"durationMinutes":-1}}}`,
		`{"sessionId":"m_1","resumeWhen":{"trigger":{"cron":"* * * * *"}}}`,
		`{"sessionId":""}`, `{"sessionId":"m"} {}`, `[]`, `null`, ``, `{"sessionId":1}`,
	)
	fuzzParams(f, acp.DecodeSuspendRequest, func(t *testing.T, r acp.SuspendRequest) {
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
	addSeeds(f,
		`{"sessionId":"m_1"}`,
		`{"sessionId":"m_1","handle":"h","input":{"text":"blue"},"continueTranscript":false}`,
		`{"sessionId":"m_1","input":"carry on"}`,
		`{"sessionId":"m_1","continueTranscript":"no"}`,
		`{}`, `7`, `{"sessionId":"m_1"`,
	)
	fuzzParams(f, acp.DecodeResumeRequest, func(t *testing.T, r acp.ResumeRequest) {
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
	addSeeds(f,
		`{"type":"boolean"}`,
		`{"type":"object","properties":{"approved":{"type":"boolean"},"manager":{"type":"string"}},"required":["approved","manager"]}`,
		`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"boolean"}}}`,
		`{"type":"object","properties":{"n":{"type":"integer"},"ok":{"type":"boolean"}},"required":["n"]}`,
		`{"type":["boolean","null"]}`, `{"type":"object","properties":{"x":null}}`, `{}`, `true`, ``,
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, ok := acp.YesNo(data); ok && !json.Valid(data) {
			t.Fatalf("a yes-no schema that is not JSON: %q", data)
		}
	})
}
