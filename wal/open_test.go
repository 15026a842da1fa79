package wal

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

// TestEmptyDirName: an empty directory name is refused, not taken for the
// working directory, where a log and its LOCK file would be written.
func TestEmptyDirName(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	calls := []struct {
		name string
		call func() error
	}{
		{"Open", func() error { _, err := Open(nil, "", Options{}); return err }},
		{"Open read-only", func() error { _, err := Open(nil, "", Options{ReadOnly: true}); return err }},
		{"Check", func() error { _, err := Check(nil, "", Options{}); return err }},
		{"Repair", func() error { _, err := Repair(nil, "", Options{}); return err }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("%s(\"\"): %v, want an error matching fs.ErrInvalid", c.name, err)
		}
	}
	if left, _ := os.ReadDir(wd); len(left) != 0 {
		t.Errorf("the working directory holds %d files, want none: %s first", len(left), left[0].Name())
	}
}
