// Package console is markov's web page for the people on the other side of
// a suspension (approvers) and for the operators who watch the machines.
// It is an http.Handler built on durable.Runner, with html/template pages
// embedded in the binary, plain HTML forms that post and redirect (it works
// with JavaScript disabled) and a little JavaScript for live updates and
// the charter graph (a vendored Mermaid, rendered in the browser; nothing
// is fetched from the network at view time).
//
// Pages, under Config.Prefix ("/ui/" by default):
//
//   - the inbox: suspensions across machines, newest first, filtered by
//     status, node, tool and text, each with its reason, call input and
//     metadata; a pending one with its time waiting and time left to its
//     deadline, a decided one with what was decided and by whom;
//   - a suspension: a form generated from the call's payload schema
//     (approve / reject shortcuts for yes-no schemas), an error result,
//     and cancel with a reason. A payload the schema rejects shows the
//     violation and leaves the suspension pending; a decision someone
//     else made first shows as a conflict (409) naming who. A decision is
//     accepted as the signed API accepts a resume (Config.Acceptor:
//     durable, the run going on elsewhere) and the person lands on the
//     machine's page at once;
//   - a machine: its instance tree, its conversation with tool calls and
//     results, and the charter's graph with the current nodes marked;
//   - the fleet (when Config.Fleet is set, on PostgreSQL): runs in progress,
//     queued work, scheduled deadlines, failing and parked jobs, across
//     every process, read from River's job table.
//
// Access: a person signs in with a shared secret (Config.Secret) and a
// name, and gets an HMAC-signed session cookie; or a reverse proxy that
// authenticates people passes their identity in a header
// (Config.IdentityHeader). The proxy must remove that header from every
// request a client sends: whoever can set it is whoever they claim. Every
// form carries a CSRF token bound to the session (a double-submitted
// cookie nonce, HMAC-signed with the identity). Every decision names who
// made it (machine.ResumeInput.By), and the machine's history records it.
//
// Live updates follow the durable event log through the event streams of
// package resumehttp (GET /suspensions/events for the inbox, GET
// /machines/{id}/events for a machine page), which the console serves
// in-process under its prefix ("events") to a signed-in person: the inbox
// refreshes when a suspension is created or decided anywhere, and a machine
// page shows the model's tokens as they stream, every event on a timeline,
// and its fresh state after each step.
package console
