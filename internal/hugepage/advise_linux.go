package hugepage

import "syscall"

// advise marks b for huge pages: the kernel backs it with them as its
// pages are first touched. A kernel without transparent huge pages
// refuses (EINVAL), and a hint refused changes nothing.
func advise(b []byte) { _ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) }
