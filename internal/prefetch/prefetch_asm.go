//go:build amd64 || arm64

package prefetch

import "unsafe"

// Line starts loading the cache line holding p into every cache level.
//
//go:noescape
func Line(p unsafe.Pointer)

// Lines starts loading the cache lines holding each of its pointers that
// is not nil: one call for several lines, where each call costs more than
// the hint itself (an assembly function is never inlined, and its caller
// keeps nothing in registers across it).
//
//go:noescape
func Lines(a, b, c, d unsafe.Pointer)
