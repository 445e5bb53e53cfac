package sqlite

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockRange takes the write lock of f's byte off for f's open file
// description, without waiting; ok is false if another description
// holds it.
func lockRange(f *os.File, off int64) (ok bool, err error) {
	err = setRange(f, unix.F_WRLCK, off)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		return false, nil
	}
	return err == nil, err
}

// unlockRange releases f's lock of byte off.
func unlockRange(f *os.File, off int64) error { return setRange(f, unix.F_UNLCK, off) }

// rangeLocked reports whether another open file description holds a lock
// of f's byte off.
func rangeLocked(f *os.File, off int64) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: off, Len: 1}
	if err := fcntl(f, unix.F_OFD_GETLK, &lk); err != nil {
		return false, err
	}
	return lk.Type != unix.F_UNLCK, nil
}

func setRange(f *os.File, typ int16, off int64) error {
	return fcntl(f, unix.F_OFD_SETLK, &unix.Flock_t{Type: typ, Whence: 0, Start: off, Len: 1})
}

// fcntl applies cmd, again if a signal interrupts it.
func fcntl(f *os.File, cmd int, lk *unix.Flock_t) error {
	for {
		err := unix.FcntlFlock(f.Fd(), cmd, lk)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
