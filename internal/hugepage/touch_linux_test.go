package hugepage

import (
	"syscall"
	"testing"
	"unsafe"
)

// TestTouchMapsEveryPage: on fresh anonymous memory that nothing has
// touched, mincore(2) reports no page resident; after Touch of all but the
// first and last pages (an array that starts and ends mid-page), every
// page the array reaches is.
func TestTouchMapsEveryPage(t *testing.T) {
	const pages = 64
	m, err := syscall.Mmap(-1, 0, pages*pageSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skip("mmap:", err)
	}
	defer syscall.Munmap(m)
	resident := func() []byte {
		vec := make([]byte, pages)
		if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Skip("mincore:", errno)
		}
		return vec
	}
	for i, v := range resident() {
		if v&1 != 0 {
			t.Skipf("page %d of fresh memory is resident already: nothing to tell", i)
		}
	}
	// From 10 bytes into page 1 to 4 bytes into page 62.
	Touch(m[pageSize+10 : 62*pageSize+4])
	for i, v := range resident() {
		if want := i >= 1 && i <= 62; (v&1 != 0) != want {
			t.Fatalf("page %d resident %v, want %v", i, v&1 != 0, want)
		}
	}
}
