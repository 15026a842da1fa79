//go:build amd64 || arm64

package prefetch

import "unsafe"

// Line starts loading the cache line holding p into every cache level.
//
//go:noescape
func Line(p unsafe.Pointer)
