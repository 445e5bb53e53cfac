package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/store"
)

// conn is one client connection: the sdk's Agent, with the sessions the
// client opened on it.
type conn struct {
	a   *Agent
	ctx context.Context // the connection's lifetime
	sdk *acpsdk.AgentSideConnection

	mu       sync.Mutex
	sessions map[string]*session
	client   string // the client's name, from initialize
	watchers sync.WaitGroup
}

var (
	_ acpsdk.Agent                  = (*conn)(nil)
	_ acpsdk.AgentLoader            = (*conn)(nil)
	_ acpsdk.ExtensionMethodHandler = (*conn)(nil)
)

func newConn(ctx context.Context, a *Agent) *conn {
	return &conn{a: a, ctx: ctx, sessions: map[string]*session{}, client: "acp client"}
}

// close stops the watchers and waits for them.
func (c *conn) close() {
	c.mu.Lock()
	for _, s := range c.sessions {
		s.stopWatch()
	}
	c.mu.Unlock()
	c.watchers.Wait()
}

// Authenticate accepts any client: the agent asks for no authentication.
func (c *conn) Authenticate(context.Context, acpsdk.AuthenticateRequest) (acpsdk.AuthenticateResponse, error) {
	return acpsdk.AuthenticateResponse{}, nil
}

// Capabilities is what initialize declares in agentCapabilities._meta:
// the draft RFC's suspend capabilities.
func Capabilities() map[string]any {
	return map[string]any{
		"supportsSuspend":         true,
		"supportsAwaitResumption": true,
		"resumeCauses":            []string{CauseExplicitResume, CauseConditionFired, CauseTimeout, CauseExternalEvent},
	}
}

// Initialize declares session loading, the standard session/resume and
// the suspend capabilities.
func (c *conn) Initialize(_ context.Context, p acpsdk.InitializeRequest) (acpsdk.InitializeResponse, error) {
	if p.ClientInfo != nil && p.ClientInfo.Name != "" {
		c.mu.Lock()
		c.client = p.ClientInfo.Name
		c.mu.Unlock()
	}
	return acpsdk.InitializeResponse{
		ProtocolVersion: acpsdk.ProtocolVersionNumber,
		AgentCapabilities: acpsdk.AgentCapabilities{
			LoadSession:         true,
			SessionCapabilities: acpsdk.SessionCapabilities{Resume: &acpsdk.SessionResumeCapabilities{}},
			Meta:                Capabilities(),
		},
		AgentInfo: &acpsdk.Implementation{Name: c.a.cfg.Name, Version: c.a.cfg.Version},
	}, nil
}

// NewSession creates a machine at Config.Node; its ID is the session's.
func (c *conn) NewSession(ctx context.Context, _ acpsdk.NewSessionRequest) (acpsdk.NewSessionResponse, error) {
	id, err := c.a.cfg.Runner.Create(ctx, "", c.a.cfg.Node, c.a.cfg.State)
	if err != nil {
		return acpsdk.NewSessionResponse{}, reqErr(err)
	}
	c.attach(id)
	c.a.log.LogAttrs(ctx, 0, "session created", strAttr("session", id))
	return acpsdk.NewSessionResponse{SessionId: acpsdk.SessionId(id)}, nil
}

// LoadSession re-emits the session's history as session/update, then its
// pending parks as suspended updates, and attaches it.
func (c *conn) LoadSession(ctx context.Context, p acpsdk.LoadSessionRequest) (acpsdk.LoadSessionResponse, error) {
	s, err := c.open(ctx, string(p.SessionId))
	if err != nil {
		return acpsdk.LoadSessionResponse{}, err
	}
	if err := c.replay(ctx, s); err != nil {
		return acpsdk.LoadSessionResponse{}, reqErr(err)
	}
	return acpsdk.LoadSessionResponse{}, nil
}

// ResumeSession is the standard session/resume: it reattaches the session
// without replaying its history and, when the session is parked, resumes
// the park, reading the RFC's input, continueTranscript and handle from
// _meta.
func (c *conn) ResumeSession(ctx context.Context, p acpsdk.ResumeSessionRequest) (acpsdk.ResumeSessionResponse, error) {
	s, err := c.open(ctx, string(p.SessionId))
	if err != nil {
		return acpsdk.ResumeSessionResponse{}, err
	}
	req, err := resumeFromMeta(string(p.SessionId), p.Meta)
	if err != nil {
		return acpsdk.ResumeSessionResponse{}, reqErr(err)
	}
	resp, err := c.resume(ctx, s, req)
	if errors.Is(err, ErrNotSuspended) {
		return acpsdk.ResumeSessionResponse{}, nil // nothing parked: reattached
	}
	if err != nil {
		return acpsdk.ResumeSessionResponse{}, reqErr(err)
	}
	return acpsdk.ResumeSessionResponse{Meta: map[string]any{"handle": resp.Handle, "stopReason": resp.StopReason}}, nil
}

// resumeFromMeta reads the RFC's resume fields from a session/resume
// request's _meta.
func resumeFromMeta(sessionID string, meta map[string]any) (ResumeRequest, error) {
	m := map[string]any{}
	for k, v := range meta {
		switch k {
		case "input", "continueTranscript", "handle":
			m[k] = v
		}
	}
	m["sessionId"] = sessionID
	raw, err := json.Marshal(m)
	if err != nil {
		return ResumeRequest{}, fmt.Errorf("%w: _meta: %w", ErrInvalidParams, err)
	}
	return DecodeResumeRequest(raw)
}

// Cancel stops the session's run in flight (the sdk has cancelled a
// prompt's context already); what it saved stays saved.
func (c *conn) Cancel(_ context.Context, p acpsdk.CancelNotification) error {
	if s := c.session(string(p.SessionId)); s != nil {
		s.cancel()
	}
	return nil
}

// CloseSession detaches the session from the connection; the machine
// stays stored.
func (c *conn) CloseSession(_ context.Context, p acpsdk.CloseSessionRequest) (acpsdk.CloseSessionResponse, error) {
	c.mu.Lock()
	s := c.sessions[string(p.SessionId)]
	delete(c.sessions, string(p.SessionId))
	c.mu.Unlock()
	if s != nil {
		s.cancel()
		s.stopWatch()
	}
	return acpsdk.CloseSessionResponse{}, nil
}

// ListSessions lists the stored machines as sessions.
func (c *conn) ListSessions(ctx context.Context, _ acpsdk.ListSessionsRequest) (acpsdk.ListSessionsResponse, error) {
	ids, err := c.a.cfg.Runner.Machines(ctx)
	if err != nil {
		return acpsdk.ListSessionsResponse{}, reqErr(err)
	}
	out := acpsdk.ListSessionsResponse{Sessions: make([]acpsdk.SessionInfo, 0, len(ids))}
	for _, id := range ids {
		out.Sessions = append(out.Sessions, acpsdk.SessionInfo{SessionId: acpsdk.SessionId(id)})
	}
	return out, nil
}

// SetSessionMode is not supported: a charter has no modes.
func (c *conn) SetSessionMode(context.Context, acpsdk.SetSessionModeRequest) (acpsdk.SetSessionModeResponse, error) {
	return acpsdk.SetSessionModeResponse{}, acpsdk.NewMethodNotFound(acpsdk.AgentMethodSessionSetMode)
}

// SetSessionConfigOption is not supported: a charter has no options.
func (c *conn) SetSessionConfigOption(context.Context, acpsdk.SetSessionConfigOptionRequest) (acpsdk.SetSessionConfigOptionResponse, error) {
	return acpsdk.SetSessionConfigOptionResponse{}, acpsdk.NewMethodNotFound(acpsdk.AgentMethodSessionSetConfigOption)
}

// HandleExtensionMethod serves the draft RFC's client-to-agent verbs.
func (c *conn) HandleExtensionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case MethodSuspend:
		return extension(ctx, c, params, DecodeSuspendRequest, func(r SuspendRequest) string { return r.SessionID }, c.suspend)
	case MethodResume:
		return extension(ctx, c, params, DecodeResumeRequest, func(r ResumeRequest) string { return r.SessionID }, c.resume)
	}
	return nil, acpsdk.NewMethodNotFound(method)
}

// session returns the attached session id, or nil.
func (c *conn) session(id string) *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

// attach returns the session id on this connection, attaching it first.
func (c *conn) attach(id string) *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[id]
	if s == nil {
		s = newSession(id)
		c.sessions[id] = s
	}
	return s
}

// extension serves an extension method: it decodes params with decode,
// opens the session the request names (sessionID) and runs do on it.
// Params that do not decode and requests do refuses are request errors.
func extension[R, T any](ctx context.Context, c *conn, params json.RawMessage, decode func(json.RawMessage) (R, error),
	sessionID func(R) string, do func(context.Context, *session, R) (T, error)) (any, error) {
	req, err := decode(params)
	if err != nil {
		return nil, reqErr(err)
	}
	s, err := c.open(ctx, sessionID(req))
	if err != nil {
		return nil, err
	}
	resp, err := do(ctx, s, req)
	if err != nil {
		return nil, reqErr(err)
	}
	return resp, nil
}

// open attaches the stored session id; an unknown one is a "resource not
// found" error. A parked session is watched for a resume from elsewhere:
// the watcher reads the machine's event log from where it stood at this
// load (durable.Loaded.EventSeq) on, not from its start.
func (c *conn) open(ctx context.Context, id string) (*session, error) {
	l, err := c.a.cfg.Runner.LoadAt(ctx, id)
	if err != nil {
		return nil, reqErr(err)
	}
	s := c.attach(id)
	s.readTo(l.EventSeq)
	for _, call := range l.Machine.Pending() {
		if isPark(call) {
			s.park(call)
		}
	}
	c.watch(s)
	return s, nil
}

// reqErr turns err into the JSON-RPC error the client sees.
func reqErr(err error) error {
	var re *acpsdk.RequestError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re):
		return re
	case errors.Is(err, store.ErrNotFound), errors.Is(err, ErrUnknownSession):
		return &acpsdk.RequestError{Code: -32002, Message: "Resource not found", Data: map[string]any{"error": err.Error()}}
	case errors.Is(err, ErrInvalidParams), errors.Is(err, instance.ErrPayloadDecode),
		errors.Is(err, instance.ErrUnknownSuspendID), errors.Is(err, instance.ErrAlreadyResolved),
		errors.Is(err, ErrNotSuspended), errors.Is(err, ErrBusy):
		return acpsdk.NewInvalidParams(map[string]any{"error": err.Error()})
	case errors.Is(err, context.Canceled):
		return acpsdk.NewRequestCancelled(map[string]any{"error": err.Error()})
	}
	return acpsdk.NewInternalError(map[string]any{"error": err.Error()})
}
