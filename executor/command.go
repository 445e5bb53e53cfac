package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// Resume runs the tool's resume handler on the resolution when the tool
// has one; otherwise the payload is the result. A handler may suspend
// again: the new call is returned and the slot stays pending. A call in
// doubt (instance.InDoubt) runs again instead, once the decision is in
// the journal.
func (e *standard) Resume(ctx context.Context, req *ResumeRequest) (*ResumeResult, error) {
	call, r := &req.Call, req.Resolution
	lf, err := e.leaf(req.Root, req.Instance)
	if err != nil {
		return nil, err
	}
	res := &ResumeResult{State: lf.in.State}
	ent, ok := lf.tools.lookup(call.Name)
	doubt, inDoubt := instance.InDoubtOf(call.Metadata)
	if !ok || (ent.tool.Resume == nil && !inDoubt) {
		res.Result = message.ToolResult(call.ToolUseID, frame.PayloadText(r.Payload), r.IsError)
		return res, nil
	}
	lf.admit, lf.journal = req.Admit, req.Journal
	f := e.newFrame(ctx, lf, ent, lf.in.State, nil)
	hc, keyID := handlerCall{tool: ent.tool, input: call.Input, resume: &r}, resumeKey(call)
	if inDoubt {
		if err := decide(ctx, req.Journal, doubt, r); err != nil {
			res.Result = message.ToolResult(call.ToolUseID, err.Error(), true)
			return res, nil
		}
		hc.resume, keyID = nil, call.ToolUseID // the call again, under its own key
	}
	f.KeyID = keyID
	f, out, err := e.limit(ctx, f, hc)
	if sr, ok := errors.AsType[*instance.SuspendRequest](err); ok {
		if _, again := instance.InDoubtOf(sr.Metadata); again && !inDoubt {
			// A resume handler's effect in doubt: the handler cannot
			// run again without the resolution it had, so the call
			// fails rather than run the effect twice.
			res.Result = message.ToolResult(call.ToolUseID, fmt.Sprintf("%v: %s", instance.ErrEffectInDoubt, sr.Reason), true)
			return res, nil
		}
		c := e.newCall(sr, call.InstanceID, instance.KindTool, instance.ByTool, call.Name, call.Input)
		c.ToolUseID, c.Stage = call.ToolUseID, call.Stage+1
		if err := declarePayload(&c, ent.tool.Payload, ent.tool.Spec.InputSchema, sr); err != nil {
			res.Result = message.ToolResult(call.ToolUseID, err.Error(), true)
			return res, nil
		}
		if err := lf.admitCall(ctx, &c, sr); err != nil {
			res.Result = message.ToolResult(call.ToolUseID, err.Error(), true)
			return res, nil
		}
		res.Again = &c
		return res, nil
	}
	if err != nil {
		res.Result = message.ToolResult(call.ToolUseID, err.Error(), true)
		return res, nil
	}
	switch {
	case f.Dirty && ent.scope == scopeOwn:
		res.State, res.StateChanged = f.State, true
	case f.Dirty && ent.scope == scopePack:
		res.Pack, res.PackState = ent.pack.Name(), f.State
	}
	res.Result = resultPart(call.ToolUseID, out, r.IsError && !inDoubt)
	return res, nil
}

// decide writes a person's decision r on effect d, which is in doubt,
// into journal j: forgotten (retry), done with a result, or failed.
func decide(ctx context.Context, j instance.EffectJournal, d instance.InDoubt, r instance.Resolution) error {
	if j == nil {
		return fmt.Errorf("effect %s: no journal to record the decision in", d.Effect)
	}
	if r.IsError {
		return fmt.Errorf("effect %s: %s", d.Effect, r.Text())
	}
	dec, err := instance.Decode[instance.InDoubtDecision](r.Payload)
	if err != nil {
		return err
	}
	// Forgotten first, then begun and ended anew: a decision applied
	// again (its run failed to save, and the resume is retried) writes
	// the same entry.
	if err := j.ForgetEffect(ctx, d.Key); err != nil || dec.Decision == "retry" {
		return err
	}
	if _, _, err := j.BeginEffect(ctx, d.Key, d.Effect, d.Digest); err != nil {
		return err
	}
	if dec.Decision == "done" {
		result := dec.Result
		if len(result) == 0 {
			result = json.RawMessage("null")
		}
		return j.EndEffect(ctx, d.Key, false, result)
	}
	text := dec.Error
	if text == "" {
		text = "failed by decision"
	}
	return j.EndEffect(ctx, d.Key, true, []byte(text))
}

// resumeKey is the stable ID of a resume handler's call: the suspension
// and its stage, the same on every retry of the same resume.
func resumeKey(call *instance.SuspendedCall) string {
	return "resume/" + call.SuspendID + "/" + strconv.Itoa(call.Stage)
}

// Command runs the command on the instance: the node's commands first,
// then its packs' commands.
func (e *standard) Command(ctx context.Context, req *CommandRequest) (*CommandResult, error) {
	lf, err := e.leaf(req.Root, req.Instance)
	if err != nil {
		return nil, err
	}
	def, pack := findCommand(lf.node, req.Name)
	if def == nil {
		return nil, fmt.Errorf("%w: %q on node %s", command.ErrUnknownCommand, req.Name, lf.node.Name())
	}
	f := &frame.Frame{Context: ctx, InstanceID: lf.in.ID, KeyScope: lf.root.ID, Journal: req.Journal}
	if req.InvocationID != "" {
		f.KeyID = "command/" + req.InvocationID
	}
	if pack != nil {
		f.State, f.Ops, f.ReadOnly = lf.root.Packs[pack.Name()], access.PackOf(pack).Ops, lf.node.Worker()
	} else {
		f.State, f.Ops = lf.in.State, access.NodeOf(lf.node).Ops
	}
	out, err := frame.Call(def.Run, f, req.Input)
	r := &CommandResult{Value: out, State: lf.in.State}
	for _, rs := range f.Resumes {
		r.Resumes = append(r.Resumes, CommandResume(rs))
	}
	if sr, ok := errors.AsType[*instance.SuspendRequest](err); ok {
		c := e.newCall(sr, lf.in.ID, instance.KindCommand, instance.ByCommand, req.Name, req.Input)
		if err := declarePayload(&c, def.Payload, def.InputSchema, sr); err != nil {
			return nil, fmt.Errorf("command %s: %w", req.Name, err)
		}
		lf.admit = req.Admit
		if err := lf.admitCall(ctx, &c, sr); err != nil {
			return nil, fmt.Errorf("command %s: %w", req.Name, err)
		}
		r.Value, r.Suspended = nil, &c
	} else if err != nil {
		return nil, command.Failed(req.Name, err)
	}
	switch {
	case f.Dirty && pack != nil:
		r.Pack, r.PackState = pack.Name(), f.State
	case f.Dirty:
		r.State, r.StateChanged = f.State, true
	}
	if f.Effect != nil {
		if _, err := e.validateEffect(f.Effect, lf); err != nil {
			return nil, fmt.Errorf("command %s: %w", req.Name, err)
		}
		r.Transition = f.Effect
	}
	return r, nil
}

// findCommand finds the command name of n: the node's own, else a pack's
// (then returned too); nil if none has it.
func findCommand(n *node.Node, name string) (*frame.Command, *node.Pack) {
	for _, c := range access.NodeOf(n).Commands {
		if c.Name == name {
			return c, nil
		}
	}
	for _, p := range n.Packs() {
		for _, c := range access.PackOf(p).Commands {
			if c.Name == name {
				return c, p
			}
		}
	}
	return nil, nil
}
