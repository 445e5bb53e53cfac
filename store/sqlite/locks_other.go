//go:build !linux

package sqlite

import "os"

// Without open file description locks, a store locks nothing across
// processes: every range is free, and durable's lock within the process
// is all there is.

func lockRange(*os.File, int64) (bool, error) { return true, nil }

func unlockRange(*os.File, int64) error { return nil }

func rangeLocked(*os.File, int64) (bool, error) { return false, nil }
