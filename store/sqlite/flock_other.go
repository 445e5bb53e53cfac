//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package sqlite

import (
	"errors"
	"os"
)

// errNoFlock reports a system without flock: every publisher assumes a
// watcher.
var errNoFlock = errors.New("sqlite: no flock on this system")

func lockShared(*os.File) error { return errNoFlock }

func tryLockExclusive(*os.File) (bool, error) { return false, errNoFlock }

func unlock(*os.File) error { return errNoFlock }
