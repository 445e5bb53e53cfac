//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package sqlite

import (
	"errors"
	"os"
	"syscall"
)

// lockShared takes f's shared lock, waiting for an exclusive holder.
func lockShared(f *os.File) error { return flock(f, syscall.LOCK_SH) }

// tryLockExclusive takes f's exclusive lock if no one else holds the lock;
// free reports whether it did.
func tryLockExclusive(f *os.File) (free bool, err error) {
	err = flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// unlock releases f's lock.
func unlock(f *os.File) error { return flock(f, syscall.LOCK_UN) }

// flock applies how to f's lock, again if a signal interrupts the wait.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
