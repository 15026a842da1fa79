package wal

import "github.com/timerlane/timerlane/internal/vfs"

// FS is the file system a log lives on. Outside this module it is OS (or
// nil, which means OS); the module's own tests pass in-memory and
// fault-injecting ones.
type FS = vfs.FS

// OS is the operating system's file system.
var OS FS = vfs.OS

// orOS returns fsys, or OS for nil: a caller outside the module, which
// cannot name the internal file systems, may pass nil.
func orOS(fsys FS) FS {
	if fsys == nil {
		return OS
	}
	return fsys
}
