// Package resumehttp serves the HTTP endpoints through which out-of-process
// results reach suspended machines: a human's approval from a web form, a
// webhook, a CI job. It wraps a durable runner (anything satisfying
// [Runner]; *durable.Runner does) in an [http.Handler].
//
// # Endpoints
//
// Every request and response body is JSON, errors and redirects included.
//
//	POST   /suspensions/{id}/resume        {"payload": <any JSON>, "is_error": false}  → Summary (202 Acceptance with an Acceptor)
//	GET    /suspensions?status=pending&machine=…&limit=…&deadline_before=<RFC 3339>   → SuspensionList
//	GET    /suspensions/{id}                                                          → Suspension
//	DELETE /suspensions/{id}               {"reason": "…"} (optional)                 → Summary (202 Acceptance with an Acceptor)
//	GET    /machines/{id}                                                             → MachineStatus
//	GET    /parked?limit=…                                                            → ParkedList
//	GET    /machines/{id}/commands                                                    → CommandList
//	POST   /machines/{id}/commands/{name}  {"input": <any JSON>, "instance_id": "…"}  → Summary (202 Acceptance with an Acceptor)
//	POST   /machines/{id}/suspend          SuspendRequest                             → SuspendResult (200; 202 if not applied yet)
//	POST   /events/{name}                  {"payload": <any JSON>}                    → SignalResult
//	GET    /machines/{id}/events?after=N                                              → text/event-stream
//	GET    /suspensions/events?after=N                                                → text/event-stream
//
// POST /suspensions/{id}/resume with "continue_transcript": false resumes
// in a fresh turn: the resumed instance sees a digest of its earlier
// transcript instead of the whole of it (machine.ResumeInput.FreshTurn).
//
// POST /events/{name} resumes every suspension waiting for the named event
// (instance.WithEvent) with the payload, each once, and answers how many
// it woke: {"event": "ci.passed", "woken": 2}. The name is the rest of the
// path (it may hold slashes) and must pass instance.CheckEvent, else 400
// invalid_event.
//
// POST /machines/{id}/suspend parks the machine on behalf of the caller
// (durable.Runner.Suspend, the ACP draft RFC's session/suspend):
//
//	{"reason": "review", "mode": "finish_step" | "interrupt_immediate" | "wait_for_completion",
//	 "resume_when": {"on_event": "ci.passed",
//	                 "timeout": {"duration_minutes": 30, "on_timeout": "fail" | "resume_with_input" | "resume_with_summary",
//	                             "input": <any JSON, for resume_with_input>}},
//	 "no_wait": false}
//
// and answers {"handle": <suspend ID>, "machine_id", "instance_id", "reason",
// "mode", "applied": true, "requested_at", "suspended_at", "resume_when"
// (echoed), "summary"}. A machine a run holds is suspended by that run at
// the mode's point; the answer waits for it, or with "no_wait" comes at
// once as 202 with "applied": false. A malformed request is 400
// invalid_suspend (or invalid_event); a machine with no primary leaf 409
// no_primary.
//
// GET /suspensions lists by status: pending (the default), resolved,
// expired or cancelled (store.Statuses) — each way out of pending is its
// own status; any other status value is 400 bad_request.
//
// The handler needs of its runner only what each endpoint uses: resume,
// cancel and get need a [Runner]; listing a [Lister]; the two command
// endpoints a [Commander]. An endpoint whose capability the runner lacks
// answers 501 not_implemented (after authentication, like every answer).
// *durable.Runner has them all.
//
// Without an [Acceptor] (Config.Acceptor), resume, cancel and invoke run
// the machine to the end of its run (every step saved by the runner)
// before they answer with a [Summary]: the
// machine, the reasons of its steps, whether the run is done, the suspend
// IDs still pending, the last assistant text and, for a command, its value.
// The resume payload is passed on as raw JSON (json.RawMessage), so it
// reaches the machine exactly as sent: a JSON string such as "approved" is
// the tool result text approved, anything else is the result as JSON.
// A cancellation gives the call the error result "cancelled: reason".
//
// A suspension whose tool or command declared its payload type
// (node.ResumeWith, command.ResumeWith) shows the type's JSON Schema in
// GET /suspensions/{id} as payload_schema, for a form to render; a resume
// payload that does not satisfy it (unless is_error is set) answers 400
// payload_decode, and the suspension stays pending. The error message is
// for the approver: short, naming the field
// ("payload: approved: expected boolean, got string", "payload: manager:
// required", "payload: by: unknown field", "payload: missing";
// instance.PayloadError's Message).
//
// The run is detached from the request's cancellation: once a result is
// accepted, a client that hangs up does not leave the machine halfway
// through its run. Bound long runs with the model's own timeouts.
//
// # Accepted, not held: 202, Location and Prefer: wait
//
// With an [Acceptor] — the runner itself for the embedded default
// (Config.Acceptor = the *durable.Runner), or a *fleet.Fleet — resume,
// cancel and invoke answer as soon as the input is durably accepted,
// without holding the request for the run's model calls:
//
//	202 Accepted
//	Location: <BasePath>/machines/{id}
//	{"machine_id": "…", "location": "/machines/…", "suspend_id": "…"}   (an Acceptance; "command" for a command)
//
// Accepted means: on the embedded runner, the input was applied and
// saved under the machine's hold (a resume handler or a command has run
// once), and the rest of the run goes on in a goroutine of the runner
// (durable.Runner.Wait drains them on shutdown); on a fleet, the input is
// committed with the River job that applies it, in whichever process.
// A second result for an accepted suspension — also one racing it — is
// 409 already_resolved, and never a second run: of 50 concurrent resumes
// of one suspension one is accepted and its resume handler runs once.
// Errors found while accepting (an unknown suspension, a payload failing
// its schema, a failing command on the embedded runner) answer as below,
// with nothing applied. A client that wants the outcome polls Location.
//
// A client that prefers to wait sends "Prefer: wait=N" (RFC 7240; other
// preferences are ignored, and so is a wait that is not a whole number
// of seconds): the handler waits up to min(N, Config.MaxWait, default
// 60 s) for the run that applies the input to end and answers 200 with
// its [Summary], or 202 as above when it does not end in time; both carry
// "Preference-Applied: wait=<seconds waited at most>". The wait uses the
// runner's completion signal in process, and the durable event log on a
// fleet (durable.Runner.Await); it never polls.
//
// GET /machines/{id} answers a [MachineStatus]: "status" is
//
//	running          a run holds the machine now (fleet-wide on PostgreSQL)
//	awaiting_resume  suspensions are pending ("pending" lists them)
//	idle             nothing pending and no run ended yet: not run, or a run
//	                 cut short after its input was saved (the next run continues it)
//	done             the last run ended; the machine waits for new input
//	parked           (fleet) its job was given up after its last attempt; "errors" says why
//
// with "revision", "updated_at", "messages", "last_text" (what the last
// run said), "event_seq" (the event log's last entry at the read: GET
// /machines/{id}/events?after=<event_seq> follows the machine from there)
// and, on a fleet, "queued" (inputs accepted, not applied yet).
// An unknown machine is 404 unknown_machine. GET /parked lists the parked
// machines with their errors — a fleet's, or those the sweeper could not
// run on SQLite ([ParkedLister]; 501 without one).
// The runner's or acceptor's [Statuser] serves GET /machines/{id}.
//
// # Idempotency-Key
//
// POST /machines/{id}/commands/{name} takes an "Idempotency-Key" header:
// 1 to 255 characters among A–Z a–z 0–9 - _ . : ~ (quoted or not). It
// becomes the invocation's ID, so the command's handler gets the stable
// key "ROOT/command/<key>" (command.Context.IdempotencyKey) for its own
// external effect. The handler remembers the key per machine for
// Config.IdempotencyWindow (default 24 h) in the replay guard's store
// (fleet-wide on a shared database); a repeat within it answers 409
// idempotency_key_reused and runs nothing — fetch the outcome from
// GET /machines/{id}. A command refused with a 4xx (unknown command, input
// or state that fails validation, unknown instance; the machine is as it
// was) gives its key back, so a corrected retry may use it; one accepted
// (202) or run spends it, and so does one answered with a 5xx, whose
// outcome may be unknown: retry that with a new key after a look at GET
// /machines/{id}. (A fleet refuses at once what no machine of its charter
// could run — a command no node declares, an input no declaration accepts
// — and checks the target and the state when the command applies: a
// command refused then has spent its key.)
// A malformed key (two headers, empty, too long, another character) is
// 400 bad_request and changes nothing.
//
// # Event streams
//
// The two event endpoints answer with Server-Sent Events (the only
// answers that are not JSON) and need a [Watcher] (501 not_implemented
// without one, or when the runner's store keeps no event log).
// GET /machines/{id}/events streams durable.Runner.Watch: each logged event
// with "id:" its sequence number, "event:" its kind ("text_delta",
// "tool_started", "suspended", "step", …) and "data:" the durable.Event as
// JSON; live events (a text delta as the model streams it) have no id, so
// a client's Last-Event-ID stays on the last logged event; a logged event
// the client already received live is an id line alone. GET
// /suspensions/events streams the suspension feed (what an approvals
// inbox needs): "id:" the feed cursor, "event:" the new status (pending,
// resolved, expired, cancelled), "data:" a [SuspensionChange]. A stream
// resumes after the Last-Event-ID header (sent by a reconnecting
// EventSource) or, on a first connection, the "after" query parameter (a
// malformed one is 400 bad_request; [ParseCursor]). A comment line goes
// out every Config.Heartbeat (default 15 s) when nothing else does, so
// that proxies keep the stream open, and each write extends the
// connection's write deadline (the server's WriteTimeout does not cut a
// stream). A failure mid-stream sends an "error" event with an
// [ErrorBody] and ends the stream. See docs/events.md for the wire format.
//
// Event streams authenticate like every request. A browser's EventSource
// cannot set headers: the page's server (the console, which knows its
// user from its session cookie) signs the URL with [SignURL], which puts
// the timestamp and signature in the QueryTimestamp and QuerySignature
// query parameters of a GET; the handler accepts them within
// Config.Window, as it does the headers. Such a URL is a bearer
// credential for that stream until the window ends; when an EventSource
// reconnects after it and gets 401, the page asks its server for a fresh
// URL, with ?after= the last id it received.
//
// # Errors
//
// Every error answers with an [ErrorBody], {"error": "…", "code": "…"}, and
// changes nothing: the machine's stored revision and its pending
// suspensions are as before. The status codes:
//
//	3xx redirect: an unclean path ("//suspensions", "/a/../suspensions")
//	    is redirected to its clean form (Location); sign the new path
//	400 bad_request, invalid_input, payload_decode, unknown_command, invalid_state,
//	    invalid_event, invalid_suspend
//	    (malformed JSON or query, input failing its schema, a payload that
//	    does not encode or fails the suspension's payload schema, an
//	    unknown command, a command whose update fails the state's
//	    validation)
//	401 missing_signature, malformed_signature, stale_timestamp, bad_signature,
//	    replayed_request (a redelivery, with a Config.Replays that keeps no
//	    outcomes)
//	404 not_found (no such endpoint), unknown_suspension, unknown_machine, no_target;
//	    an ID no store can hold (store.ValidID: empty, over 256 bytes, not
//	    UTF-8, with a NUL byte) is unknown, whatever the store
//	405 method_not_allowed (with an Allow header)
//	409 already_resolved (resumed, cancelled or expired before, or a result
//	    already accepted), idempotency_key_reused, redelivery_pending (with
//	    Retry-After: a redelivery while the first delivery is served),
//	    conflict (another process saved the machine first), duplicate_id,
//	    no_primary (a suspend of a machine with no primary leaf)
//	410 deadline_passed: the suspension's deadline passed before the resume;
//	    its on-timeout action applies instead (the sweeper resolves it), so
//	    the result is gone for good — unlike a 409, which reports that a
//	    result already arrived
//	413 body_too_large (Config.MaxBody)
//	422 command_failed: the command's handler returned an error; its
//	    message is sent
//	429 rate_limited: too many failed authentications from the client's
//	    address (with a Retry-After header, in seconds)
//	500 internal: anything else, a handler's panic included; the details
//	    are logged, never sent, under the correlation_id the body carries
//	501 not_implemented: the runner lacks the endpoint's capability
//	    ([Lister], [Commander], [Signaler], [Suspender],
//	    [Statuser], [ParkedLister])
//
// Of concurrent resumes (or cancellations) of one suspension exactly one
// succeeds and the others are refused, with 409 conflict or
// already_resolved. A resume that reaches the runner after the winner's
// result was saved gets 409 already_resolved when the runner's index still
// lists resolved suspensions, and 404 unknown_suspension when the index
// keeps only pending ones.
//
// Messages of 4xx errors that describe the request (schema failures, an
// unknown command, a command's own error) carry the details; store errors
// get fixed messages, and a 500 says only "internal error": the details go
// to the log, in a record with the same correlation_id.
//
// One caveat on "changes nothing": the runner saves the result before it
// calls the model, so an error raised later in the run (the model failing,
// a step limit — a 500 — or, rarely, another writer saving the machine
// between two steps — a 409) leaves the result applied and the machine
// saved at its last good step; running the machine again continues from
// there.
//
// # Authentication
//
// Every request carries an HMAC-SHA256 signature under a shared secret in
// two headers:
//
//	X-Markov-Timestamp: <unix seconds>
//	X-Markov-Signature: sha256=<hex of HMAC-SHA256(secret, message)>
//
// where the signed message is
//
//	timestamp + "\n" + method + "\n" + path + "\n" + body
//
// and path is the request's escaped URL path, followed by "?" and the raw
// query when there is one (for example "/suspensions?status=pending"). The
// handler compares signatures in constant time and refuses timestamps more
// than Config.Window away from its clock, in either direction. A handler
// also remembers the signatures of the POST and DELETE requests it served
// within the window, with their outcome, and answers a second delivery of
// the same one with the first one's outcome, running nothing, as webhook
// senders expect: 200 with the first body when it succeeded (202
// Accepted, or a run's summary), the first status and body when it was
// refused; 409 redelivery_pending with Retry-After: 1 while the first is
// still being served, or when its outcome is unknown (a 5xx, or a body
// over 256 KiB). The outcome is kept by a replay guard that is a
// store.OutcomeKeeper (every store of this module; the handler's own
// memory); with another, a redelivery is 401 replayed_request. Two
// identical commands signed in the same second are one request, so give
// them a distinguishing request_id. The memory is the
// store's when it is a store.ReplayGuard (every store of this module is;
// Config.Replays, or the runner's ReplayGuard method), so a signed request
// is accepted once by all the handlers that share the database. Only for a
// runner without one does each handler remember in its own memory: then a
// request delivered to two handlers is accepted by both (resumes and
// cancellations still resolve once, through the store; commands run
// twice). Mount the handler at the root of the server (or sign
// the path the handler sees), since the path is signed.
//
// The secret must be at least [MinSecretLen] (32) bytes and not one byte
// repeated ([CheckSecret], [ErrWeakSecret]): for example the output of
// "openssl rand -hex 32".
//
// # Limits and defaults
//
// The handler does no work for a request it cannot authenticate, and
// bounds what such a request costs:
//
//   - A client address that failed authentication (a bad or missing
//     signature, a body over the cap) Config.FailureBurst times in a row
//     (default 10) is refused with 429 until it earns another try: one per
//     Config.FailureRefill (default 6 s), a token bucket per address
//     (Config.ClientKey, default the IP of the connection; behind reverse
//     proxies, [TrustedProxies] keys a request from one of them by the
//     client address it forwards in Forwarded or X-Forwarded-For, and
//     ignores those headers from anyone else). A second delivery of a
//     correctly signed request is no failure: a sender retrying is not
//     limited. At most Config.MaxClients
//     addresses (default 10000) are remembered; the forgiven ones are
//     forgotten first.
//   - The signature headers are checked before the body is read: a
//     request without well-formed, current ones and a limited address are
//     refused without reading the body, and the connection is closed.
//   - The body is read up to Config.MaxBody, and the signature is checked
//     over it before anything else happens. A body larger than MaxBody
//     (default 1 MiB) is answered 413 body_too_large once it has been
//     read to its end and discarded, up to 16 MiB (a body declared larger
//     is not read), and the connection is closed: a client that writes
//     its whole request before it reads the answer gets the 413, not a
//     connection reset. It counts as a failed authentication. Until it
//     is verified, a body counts as a failed authentication of its
//     address: an address has at most Config.FailureBurst unverified
//     bodies in the air at once, and so holds at most that many times
//     MaxBody of memory; a verified request gives its count back.
//   - After the handler, net/http discards up to 256 KiB of a body left
//     unread, without keeping it, before it closes the connection.
//   - Timestamps more than Config.Window (default 5 min) away are refused.
//
// The connection-level limits belong to the http.Server: serve the
// handler through [NewServer], which sets them (or set the same fields on
// your own server):
//
//	ReadHeaderTimeout  5 s     DefaultReadHeaderTimeout
//	ReadTimeout        15 s    DefaultReadTimeout: the whole request, body included
//	WriteTimeout       5 min   DefaultWriteTimeout: until the answer is written,
//	                           the run a resume or a command starts included
//	IdleTimeout        15 s    DefaultIdleTimeout: between keep-alive requests
//	MaxHeaderBytes     16 KiB  DefaultMaxHeaderBytes
//
// A run that outlasts WriteTimeout still completes and is saved; its
// client gets no answer and can look the machine up. With an Acceptor no
// answer waits for a run longer than Config.MaxWait.
//
// A client signs with [SignRequest] (or [Sign] for other HTTP stacks):
//
//	body, _ := json.Marshal(resumehttp.ResumeRequest{Payload: json.RawMessage(`"approved"`)})
//	req, _ := http.NewRequestWithContext(ctx, http.MethodPost,
//		baseURL+"/suspensions/"+url.PathEscape(suspendID)+"/resume", bytes.NewReader(body))
//	req.Header.Set("Content-Type", "application/json")
//	resumehttp.SignRequest(secret, req, body, time.Now())
//	resp, err := http.DefaultClient.Do(req)
//	…
//	var sum resumehttp.Summary
//	err = json.NewDecoder(resp.Body).Decode(&sum) // on 200; otherwise an ErrorBody
//
// or, from a shell:
//
//	ts=$(date +%s); body='{"payload":"approved"}'; path=/suspensions/$ID/resume
//	sig=$(printf '%s\n%s\n%s\n%s' "$ts" POST "$path" "$body" | openssl dgst -sha256 -hmac "$SECRET" -hex | sed 's/^.* //')
//	curl -X POST -H "X-Markov-Timestamp: $ts" -H "X-Markov-Signature: sha256=$sig" -d "$body" "$BASE$path"
package resumehttp
