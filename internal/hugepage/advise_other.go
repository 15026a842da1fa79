//go:build !linux

package hugepage

// advise does nothing where the kernel takes no such hint.
func advise([]byte) {}
