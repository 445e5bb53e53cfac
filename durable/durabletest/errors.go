package durabletest

import "errors"

// ErrScenario is a Scenario that cannot run: a required field is missing.
var ErrScenario = errors.New("durabletest: incomplete scenario")

// ErrInDoubt is an effect left in doubt on a restart that neither its
// reconcile hook nor Scenario.Decide settled.
var ErrInDoubt = errors.New("durabletest: effect in doubt and no decision")
