package webhook

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Action is what a route does with a verified delivery.
type Action string

// The actions of a route.
const (
	// Resume resumes the suspension named by Route.SuspendID with the
	// payload at Route.Payload.
	Resume Action = "resume"
	// Cancel cancels the suspension named by Route.SuspendID; the string
	// at Route.Payload, if any, is the reason.
	Cancel Action = "cancel"
	// Signal resumes every suspension waiting for the event named by
	// Route.Event with the payload at Route.Payload.
	Signal Action = "signal"
)

// Source says where a value of a delivery is: exactly one of a JSON
// Pointer into the body, a request header, or a wildcard of the route's
// path (its URL template). Prefix is put before the value found (an
// event name "github.push." + the repository, say).
type Source struct {
	// Pointer is a JSON Pointer (RFC 6901) into the body: "/data/id".
	// The value must be a string or a number.
	Pointer string `json:"pointer,omitempty"`
	// Header is a request header: "X-GitHub-Event".
	Header string `json:"header,omitempty"`
	// Path is a wildcard of Route.Path: "id" for "/approvals/{id}".
	Path string `json:"path,omitempty"`
	// Prefix is put before the value.
	Prefix string `json:"prefix,omitempty"`
}

func (s Source) set() int {
	n := 0
	for _, v := range []string{s.Pointer, s.Header, s.Path} {
		if v != "" {
			n++
		}
	}
	return n
}

// value returns the value s names in r (its body), or an error wrapping
// ErrBadPointer when it is absent.
func (s Source) value(r *http.Request, body []byte) (string, error) {
	var v string
	switch {
	case s.Header != "":
		if v = r.Header.Get(s.Header); v == "" {
			return "", fmt.Errorf("%w: header %s is missing", ErrBadPointer, s.Header)
		}
	case s.Path != "":
		if v = r.PathValue(s.Path); v == "" {
			return "", fmt.Errorf("%w: path wildcard %s is empty", ErrBadPointer, s.Path)
		}
	default:
		var err error
		if v, err = lookupString(body, s.Pointer); err != nil {
			return "", err
		}
	}
	return s.Prefix + v, nil
}

// Route is one webhook endpoint: where it is served, how its deliveries
// are signed, and what a verified delivery does.
type Route struct {
	// Path is where the route is served under the handler, an
	// http.ServeMux path that may hold wildcards ("/github",
	// "/approvals/{id}"). Required; each route has its own.
	Path string `json:"path"`
	// Scheme is how the sender signs its deliveries. Required.
	Scheme Scheme `json:"scheme"`
	// Secrets are the shared secrets, several while one is rotated: a
	// delivery signed with any of them is accepted. Required. For
	// StandardWebhooks each is "whsec_" + base64; for GitHub and Stripe
	// the secret as the sender shows it.
	Secrets []string `json:"secrets"`
	// Tolerance is how far a signed timestamp may be from the clock
	// (DefaultTolerance if zero). GitHub signs none.
	Tolerance time.Duration `json:"tolerance,omitempty"`
	// Action is what a verified delivery does. Required.
	Action Action `json:"action"`
	// SuspendID names the suspension of a Resume or Cancel.
	SuspendID Source `json:"suspend_id,omitzero"`
	// Event names the event of a Signal.
	Event Source `json:"event,omitzero"`
	// Payload is a JSON Pointer to the payload of a Resume or Signal, or
	// to the reason (a string) of a Cancel: "" is the whole body for a
	// payload, no reason for a cancellation.
	Payload string `json:"payload,omitempty"`
	// DeliveryID names the delivery ID, the same in every redelivery of
	// one delivery; by default webhook-id (Standard Webhooks),
	// X-GitHub-Delivery (GitHub) or the event's "/id" (Stripe).
	DeliveryID Source `json:"delivery_id,omitzero"`
}

// check returns an error wrapping ErrInvalidConfig naming what is wrong
// with r.
func (r Route) check(signals bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: route %s: %s", ErrInvalidConfig, r.Path, fmt.Sprintf(format, args...))
	}
	if !strings.HasPrefix(r.Path, "/") || strings.ContainsAny(r.Path, " \t") {
		return bad("path must start with / and hold no space")
	}
	switch r.Scheme {
	case StandardWebhooks, GitHub, Stripe:
	default:
		return bad("scheme must be %s, %s or %s", StandardWebhooks, GitHub, Stripe)
	}
	if r.Tolerance < 0 {
		return bad("tolerance is negative")
	}
	var need Source
	switch r.Action {
	case Resume, Cancel:
		need = r.SuspendID
		if r.Event.set() != 0 {
			return bad("event is for signal routes")
		}
	case Signal:
		need = r.Event
		if !signals {
			return bad("signal needs Config.Signaler")
		}
		if r.SuspendID.set() != 0 {
			return bad("suspend_id is for resume and cancel routes")
		}
	default:
		return bad("action must be resume, cancel or signal")
	}
	if need.set() != 1 {
		return bad("the %s source needs exactly one of pointer, header or path", map[bool]string{true: "event", false: "suspend_id"}[r.Action == Signal])
	}
	if r.DeliveryID.set() > 1 {
		return bad("delivery_id needs at most one of pointer, header or path")
	}
	for _, s := range []Source{need, r.DeliveryID} {
		if err := checkPointer(s.Pointer); err != nil {
			return bad("%v", err)
		}
		if s.Path != "" && !strings.Contains(r.Path, "{"+s.Path+"}") && !strings.Contains(r.Path, "{"+s.Path+"...}") {
			return bad("path wildcard %s is not in the path", s.Path)
		}
	}
	if err := checkPointer(r.Payload); err != nil {
		return bad("payload: %v", err)
	}
	return nil
}

// deliverySource is where r's delivery ID is.
func (r Route) deliverySource() Source {
	switch {
	case r.DeliveryID.set() != 0:
		return r.DeliveryID
	case r.Scheme == Stripe:
		return Source{Pointer: "/id"}
	case r.Scheme == GitHub:
		return Source{Header: HeaderGitHubDelivery}
	default:
		return Source{Header: HeaderID}
	}
}
