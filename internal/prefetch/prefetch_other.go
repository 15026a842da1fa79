//go:build !amd64 && !arm64

package prefetch

import "unsafe"

// Line does nothing on this architecture.
func Line(p unsafe.Pointer) {}

// Lines does nothing on this architecture.
func Lines(a, b, c, d unsafe.Pointer) {}
