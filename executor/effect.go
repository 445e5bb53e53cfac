package executor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/node"
)

// validateEffect checks a transition requested for lf and normalizes it:
// states decoded and validated for their nodes, spawn IDs assigned. It
// returns a description for the tool result.
func (e *standard) validateEffect(eff *instance.Effect, lf *leaf) (string, error) {
	switch eff.Kind {
	case instance.EffectNone:
		return "no change", nil
	case instance.EffectGoto:
		return e.validateGoto(eff, lf)
	case instance.EffectSpawn:
		return e.validateSpawn(eff, lf)
	case instance.EffectCede:
		if len(lf.ancestors) == 0 {
			return "", ErrCedeFromRoot
		}
		return "ceded to " + lf.ancestors[len(lf.ancestors)-1].ID, nil
	}
	return "", fmt.Errorf("unknown effect kind %d", eff.Kind)
}

// validateGoto checks a move of lf to another node. A non-worker leaf
// frees its primary slot when it moves; a worker may only become a
// primary when there is none.
func (e *standard) validateGoto(eff *instance.Effect, lf *leaf) (string, error) {
	target, s, err := e.placement(eff.Target, eff.State)
	if err != nil {
		return "", err
	}
	eff.State = s
	if !target.Worker() {
		if err := e.checkPrimaries(lf, 1); err != nil {
			return "", err
		}
	}
	return "transitioned to " + eff.Target, nil
}

// validateSpawn checks the children lf spawns: known nodes, valid states,
// free IDs (assigned when not given), at most one primary leaf after.
func (e *standard) validateSpawn(eff *instance.Effect, lf *leaf) (string, error) {
	if len(eff.Children) == 0 {
		return "", ErrEmptySpawn
	}
	children := make([]instance.Child, len(eff.Children))
	ids := make([]string, len(children))
	primaries := 0
	for i, c := range eff.Children {
		n, s, err := e.placement(c.Node, c.State)
		if err != nil {
			return "", err
		}
		if !n.Worker() {
			primaries++
		}
		if c.ID == "" {
			c.ID = e.cfg.NewID()
		}
		if lf.taken(c.ID) || slices.ContainsFunc(children[:i], func(o instance.Child) bool { return o.ID == c.ID }) {
			return "", fmt.Errorf("%w: instance ID %q", ErrDuplicateID, c.ID)
		}
		c.State = s
		children[i], ids[i] = c, c.Node+" "+c.ID
	}
	if err := e.checkPrimaries(lf, primaries); err != nil {
		return "", err
	}
	eff.Children = children
	return "spawned " + strings.Join(ids, ", "), nil
}

// placement resolves the node a transition puts an instance on and the
// state it starts with.
func (e *standard) placement(name string, state any) (*node.Node, any, error) {
	n := e.nodes[name]
	if n == nil {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownNode, name)
	}
	s, err := n.NormalizeState(state)
	return n, s, err
}

// checkPrimaries fails when adding added non-worker leaves for lf would
// leave more than one.
func (e *standard) checkPrimaries(lf *leaf, added int) error {
	if added > 0 && e.primaryElsewhere(lf) {
		added++
	}
	if added > 1 {
		return ErrPrimaryConflict
	}
	return nil
}
