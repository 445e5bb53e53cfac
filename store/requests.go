package store

import (
	"context"
	"fmt"
	"time"
)

// SuspendRequest is a caller's request to suspend a machine that a run
// holds (package durable: Runner.Suspend): kept by a [SuspendRequester]
// until the run that holds the machine applies it at the point its mode
// names, in whichever process that run is.
type SuspendRequest struct {
	// ID is the suspend ID the suspension will have once applied. It is
	// unique among the requests of a store. Required, a [ValidID].
	ID string
	// MachineID is the machine to suspend. Required, a [ValidID].
	MachineID string
	// Body is the request as its maker encoded it (package durable: JSON of
	// the reason, the mode and the resume conditions); the store keeps it
	// as opaque bytes.
	Body []byte
	// CreatedAt is when the request was added (store clock, UTC; set by
	// the store).
	CreatedAt time.Time
}

// Validate reports a malformed request, wrapping [ErrInvalid].
func (r *SuspendRequest) Validate() error {
	if p := idProblem(r.ID); p != "" {
		return fmt.Errorf("%w: suspend request ID %s", ErrInvalid, p)
	}
	if p := idProblem(r.MachineID); p != "" {
		return fmt.Errorf("%w: suspend request %q: machine ID %s", ErrInvalid, r.ID, p)
	}
	return nil
}

// SuspendRequester is the optional capability of a [Store] that keeps
// caller suspend requests for machines, for every process that shares the
// store: a run checks its machine's requests at every step boundary, so a
// request made in any process reaches the run wherever it is.
type SuspendRequester interface {
	// AddSuspendRequest keeps r. A machine that does not exist is
	// ErrNotFound; an ID already requested, ErrConflict; a malformed
	// request, ErrInvalid.
	AddSuspendRequest(ctx context.Context, r SuspendRequest) error
	// SuspendRequests returns the requests kept for machineID, oldest
	// first (none: an empty list, whether or not the machine exists). It
	// is called at every step boundary of every run: keep it cheap.
	SuspendRequests(ctx context.Context, machineID string) ([]SuspendRequest, error)
	// DropSuspendRequest removes request id of machineID; one that is not
	// kept is no error. Deleting a machine drops its requests too.
	DropSuspendRequest(ctx context.Context, machineID, id string) error
}

// RequestReporter is the optional capability of a [SuspendRequester] that
// tells, in the transaction of every load and save of a machine, whether
// suspend requests are kept for it: Snapshot.SuspendRequests, and the
// report of SaveReporting. A run then reads the requests at a step
// boundary only when its last load or save saw some, instead of at every
// boundary. Every store of this module is one.
type RequestReporter interface {
	SuspendRequester
	// SaveReporting is [Snapshots.Save] that also reports whether suspend
	// requests were kept for the machine when the save committed.
	SaveReporting(ctx context.Context, sv Save) (revision int64, requests bool, err error)
}
