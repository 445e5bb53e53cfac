package resumehttp_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store/memstore"
)

// sse is a Server-Sent Events client reading one response the way the
// WHATWG EventSource does: it keeps the last event ID across events,
// dispatches on blank lines, and ignores comments (it counts them).
type sse struct {
	resp     *http.Response
	sc       *bufio.Scanner
	lastID   string
	comments []string
}

// sseEvent is one dispatched event.
type sseEvent struct {
	ID, Name, Data string
}

func openSSE(t testing.TB, req *http.Request) *sse {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return &sse{resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next returns the next event with data (an id-only event moves lastID
// on and is not returned).
func (s *sse) next(t testing.TB) sseEvent {
	t.Helper()
	var ev sseEvent
	var data []string
	for s.sc.Scan() {
		line := s.sc.Text()
		if line == "" {
			ev.ID = s.lastID
			if data == nil {
				ev = sseEvent{}
				continue
			}
			ev.Data = strings.Join(data, "\n")
			return ev
		}
		if c, ok := strings.CutPrefix(line, ":"); ok {
			s.comments = append(s.comments, strings.TrimSpace(c))
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			s.lastID = value
		case "event":
			ev.Name = value
		case "data":
			data = append(data, value)
		}
	}
	t.Fatalf("stream ended: %v", s.sc.Err())
	return ev
}

// until reads events until one named name, returning them all.
func (s *sse) until(t testing.TB, name string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev := s.next(t)
		out = append(out, ev)
		if ev.Name == name {
			return out
		}
	}
}

// newMem returns a memstore closed when the test ends.
func newMem(t testing.TB) *memstore.Store {
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func eventsPath(id string) string { return "/machines/" + id + "/events" }

func TestMachineEventsStreamAndResumeWithLastEventID(t *testing.T) {
	forEachEnv(t, func(t *testing.T, e *env) {
		machineID, suspendID := e.start(t, "refund order 42")
		s := openSSE(t, e.signed(t, http.MethodGet, eventsPath(machineID), ""))
		first := s.until(t, "step")
		var kinds []string
		for i, ev := range first {
			kinds = append(kinds, ev.Name)
			require.Equal(t, strconv.Itoa(i+1), ev.ID, "ids are the sequence numbers")
			var de durable.Event
			require.NoError(t, json.Unmarshal([]byte(ev.Data), &de))
			require.Equal(t, ev.Name, string(de.Kind))
			require.Equal(t, int64(i+1), de.Seq)
		}
		require.Contains(t, kinds, "tool_started")
		require.Contains(t, kinds, "suspended")

		// A resume while the stream is open arrives on it.
		requireOK[resumehttp.Summary](t, e.call(t, http.MethodPost, resumePath(suspendID), `{"payload":"approved"}`))
		rest := s.until(t, "step")
		require.Equal(t, "resumed", rest[0].Name)

		// Reconnecting with Last-Event-ID gives exactly what followed:
		// the next sequence numbers up to the last one seen, and the
		// same text.
		req := e.signed(t, http.MethodGet, eventsPath(machineID), "")
		req.Header.Set("Last-Event-ID", first[len(first)-1].ID)
		again := openSSE(t, req).until(t, "step")
		for i, ev := range again {
			require.Equal(t, strconv.Itoa(len(first)+i+1), ev.ID)
		}
		require.Equal(t, s.lastID, again[len(again)-1].ID)
		require.Equal(t, streamedText(t, rest), streamedText(t, again))
		require.NotEmpty(t, streamedText(t, again))
	})
}

// streamedText is the text the text deltas of evs add up to.
func streamedText(t testing.TB, evs []sseEvent) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range evs {
		if ev.Name == "text_delta" {
			var de durable.Event
			require.NoError(t, json.Unmarshal([]byte(ev.Data), &de))
			b.WriteString(de.Text)
		}
	}
	return b.String()
}

func TestEventStreamForABrowser(t *testing.T) {
	e := memEnv(t)
	machineID, _ := e.start(t, "refund order 42")
	// A signed URL with ?after=: what a page hands to EventSource.
	url := resumehttp.SignURL(secret, eventsPath(machineID)+"?after=2", e.clock.Now())
	s := openSSE(t, e.request(t, http.MethodGet, url, ""))
	require.Equal(t, "3", s.next(t).ID)
	require.Contains(t, s.comments, "markov event stream")

	// Tampered or unsigned: refused like any request.
	requireError(t, do(t, e.request(t, http.MethodGet, strings.Replace(url, "after=2", "after=0", 1), "")), http.StatusUnauthorized, "bad_signature")
	requireError(t, do(t, e.request(t, http.MethodGet, eventsPath(machineID), "")), http.StatusUnauthorized, "missing_signature")
	// A signed URL is not accepted for anything but a GET.
	requireError(t, do(t, e.request(t, http.MethodPost, url, "")), http.StatusUnauthorized, "missing_signature")
	// Nor after the window.
	e.clock.Advance(resumehttp.DefaultWindow + time.Minute)
	requireError(t, do(t, e.request(t, http.MethodGet, url, "")), http.StatusUnauthorized, "stale_timestamp")
}

func TestEventStreamBadCursorAndUnknownMachine(t *testing.T) {
	e := memEnv(t)
	machineID := e.create(t)
	for _, c := range []struct{ header, query string }{{"x", ""}, {"-1", ""}, {"", "1e3"}, {"99999999999999999999", ""}} {
		req := e.signed(t, http.MethodGet, eventsPath(machineID)+"?after="+c.query, "")
		if c.header != "" {
			req.Header.Set("Last-Event-ID", c.header)
		}
		requireError(t, do(t, req), http.StatusBadRequest, "bad_request")
	}
	requireError(t, e.call(t, http.MethodGet, "/machines/%00/events", ""), http.StatusNotFound, "unknown_machine")
	requireError(t, e.call(t, http.MethodPost, eventsPath(machineID), ""), http.StatusMethodNotAllowed, "method_not_allowed")
}

// noWatchRunner is a durable runner whose store keeps no event log.
type noWatchRunner struct{ *durable.Runner }

func (noWatchRunner) CanWatch() bool { return false }

func TestEventStreamNotImplemented(t *testing.T) {
	for name, wrap := range map[string]func(r resumehttp.Runner) resumehttp.Runner{
		"core runner": func(r resumehttp.Runner) resumehttp.Runner { return coreRunner{r} },
		"no log":      func(r resumehttp.Runner) resumehttp.Runner { return noWatchRunner{r.(*durable.Runner)} },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnvWith(t, newMem(t), func(c *resumehttp.Config) { c.Runner = wrap(c.Runner) })
			requireError(t, e.call(t, http.MethodGet, eventsPath("m1"), ""), http.StatusNotImplemented, "not_implemented")
			requireError(t, e.call(t, http.MethodGet, "/suspensions/events", ""), http.StatusNotImplemented, "not_implemented")
		})
	}
}

func TestEventStreamHeartbeat(t *testing.T) {
	e := newEnvWith(t, newMem(t), func(c *resumehttp.Config) { c.Heartbeat = 10 * time.Millisecond })
	machineID := e.create(t)
	resp, err := http.DefaultClient.Do(e.signed(t, http.MethodGet, eventsPath(machineID), ""))
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	beats := 0
	for beats < 3 && sc.Scan() {
		if sc.Text() == ": heartbeat" {
			beats++
		}
	}
	require.Equal(t, 3, beats)
}

func TestSuspensionEventsStream(t *testing.T) {
	e := sqliteEnv(t)
	s := openSSE(t, e.signed(t, http.MethodGet, "/suspensions/events", ""))
	machineID, suspendID := e.start(t, "refund order 42")
	created := s.next(t)
	require.Equal(t, "pending", created.Name)
	var c resumehttp.SuspensionChange
	require.NoError(t, json.Unmarshal([]byte(created.Data), &c))
	require.Equal(t, suspendID, c.ID)
	require.Equal(t, machineID, c.MachineID)
	require.Equal(t, created.ID, strconv.FormatInt(c.Cursor, 10))

	requireOK[resumehttp.Summary](t, e.call(t, http.MethodPost, resumePath(suspendID), `{"payload":"approved"}`))
	resolved := s.next(t)
	require.Equal(t, "resolved", resolved.Name)

	// Resuming the feed after the first change.
	req := e.signed(t, http.MethodGet, "/suspensions/events", "")
	req.Header.Set("Last-Event-ID", created.ID)
	require.Equal(t, resolved, openSSE(t, req).next(t))
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range [][2]string{{"", ""}, {"5", ""}, {"", "7"}, {" 3 ", "x"}, {"-1", ""}, {"+1", ""}, {"9223372036854775807", ""}, {"9223372036854775808", ""}, {"1e3", ""}, {"\x00", "1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, header, query string) {
		n, err := resumehttp.ParseCursor(header, query)
		if err != nil {
			if !errors.Is(err, resumehttp.ErrBadCursor) || n != 0 {
				t.Fatalf("ParseCursor(%q, %q) = %d, %v", header, query, n, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseCursor(%q, %q) = %d", header, query, n)
		}
		v := strings.TrimSpace(header)
		if v == "" {
			v = strings.TrimSpace(query)
		}
		if v != "" && strconv.FormatInt(n, 10) != strings.TrimLeft(v, "0") && n != 0 {
			t.Fatalf("ParseCursor(%q, %q) = %d, not the number given", header, query, n)
		}
	})
}
