//go:build unix

package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Lock implements FS.Lock with flock(2) on the file, which the kernel
// drops when the process ends however it ends, so that a killed node
// leaves no stale lock. flock locks belong to an open file, so a second
// Lock from the same process fails too. A directory is locked through a
// descriptor of its own.
func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, syscall.EISDIR) {
		f, err = os.Open(name)
	}
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			err = ErrLocked
		}
		return nil, &fs.PathError{Op: "lock", Path: name, Err: err}
	}
	return f, nil
}
