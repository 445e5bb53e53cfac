package a2a

// This file is the endpoint that receives remote agents' push
// notifications for the tasks that suspended calls wait on.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
)

// maxNotification is the size, in bytes, of the largest push
// notification body read.
const maxNotification = 1 << 20

// maxToken is the length of the longest notification token taken.
const maxToken = 512

// tokenHeaders are the headers a notification's token comes in: the Go
// SDK's and the JavaScript SDK's.
var tokenHeaders = []string{"A2A-Notification-Token", "X-A2A-Notification-Token"}

// Signaler wakes the suspensions waiting for a named event:
// *durable.Runner (which runs their machines at once) and *fleet.Fleet
// (which hands them to its workers) are Signalers.
type Signaler interface {
	Signal(ctx context.Context, event string, payload any) (woken int, err error)
}

// PushHandler returns the http.Handler that receives the push
// notifications of remote agents (Config.PushURL names where it is
// mounted). A notification is a POST of an A2A StreamResponse (a task,
// a status or an artifact update) with the token registered for the
// task in the A2A-Notification-Token (or X-A2A-Notification-Token)
// header; it wakes the call waiting on the task, in any process sharing
// the store, which then reads the task (tasks/get) and goes on.
//
// Answers: 204 when a call woke; 400 for a body that is not a
// notification, 401 without a token, 405 for another method, 413 for a
// body over 1 MiB; 404 when no call waits for the token's task (unknown,
// finished, or a wrong token: a token is only ever checked by the event
// it names, so a forged one wakes nothing); 500 when the signal failed.
// Nothing changes but on 204. logger is slog.Default() if nil.
func PushHandler(s Signaler, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.Default()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, fmt.Sprintf("%v: method %s", ErrInvalidNotification, req.Method), http.StatusMethodNotAllowed)
			return
		}
		token := ""
		for _, h := range tokenHeaders {
			if token = req.Header.Get(h); token != "" {
				break
			}
		}
		if token == "" || len(token) > maxToken {
			http.Error(w, fmt.Sprintf("%v: no A2A-Notification-Token", ErrInvalidNotification), http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxNotification))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				http.Error(w, fmt.Sprintf("%v: body over %d bytes", ErrInvalidNotification, maxNotification), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, fmt.Sprintf("%v: body: %v", ErrInvalidNotification, err), http.StatusBadRequest)
			return
		}
		n, err := decodeNotification(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// The wake runs the machine (durable.Runner): a sender that hangs
		// up early must not stop it half way.
		woken, err := s.Signal(context.WithoutCancel(req.Context()), pushEvent(token), n)
		switch {
		case err != nil:
			logger.Error("a2a push notification: signal failed", "task", n.TaskID, "err", err)
			http.Error(w, "a2a: the notification could not be applied", http.StatusInternalServerError)
		case woken == 0:
			http.Error(w, fmt.Sprintf("%v: task %q", ErrUnknownTask, n.TaskID), http.StatusNotFound)
		default:
			logger.Debug("a2a push notification", "task", n.TaskID, "state", n.State, "woken", woken)
			w.WriteHeader(http.StatusNoContent)
		}
	})
}

// decodeNotification decodes a push notification's body: an A2A
// StreamResponse naming a task. It returns the wake it signals.
func decodeNotification(body []byte) (wake, error) {
	var sr sdk.StreamResponse
	if err := json.Unmarshal(body, &sr); err != nil {
		return wake{}, fmt.Errorf("%w: %v", ErrInvalidNotification, err)
	}
	var w wake
	switch v := sr.Event.(type) {
	case *sdk.Task:
		w = wake{TaskID: string(v.ID), State: string(v.Status.State)}
	case *sdk.TaskStatusUpdateEvent:
		w = wake{TaskID: string(v.TaskID), State: string(v.Status.State)}
	case *sdk.TaskArtifactUpdateEvent:
		w = wake{TaskID: string(v.TaskID)}
	case *sdk.Message:
		w = wake{TaskID: string(v.TaskID)}
	}
	if w.TaskID == "" {
		return wake{}, fmt.Errorf("%w: it names no task", ErrInvalidNotification)
	}
	return w, nil
}
