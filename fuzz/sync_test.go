package fuzz

import (
	"os"
	"strings"
	"testing"
)

// normalize drops what legitimately differs between a test file and its
// copy here: the package clause, the note about the copy, the imports and
// declarations only the original's test function uses, that function
// itself, and blank lines.
func normalize(s string) string {
	if i := strings.Index(s, "\nfunc TestEngineMatchesModel"); i >= 0 {
		s = s[:i]
	}
	var out []string
	skipNote := false
	for _, line := range strings.Split(s, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "// This file is a copy of"):
			skipNote = true
			continue
		case skipNote && strings.HasPrefix(t, "//"):
			if strings.Contains(t, "keep the") {
				skipNote = false
			}
			continue
		}
		skipNote = false
		if t == "" || t == "//" || strings.HasPrefix(t, "package ") || t == `"flag"` || t == `"testing"` || strings.HasPrefix(t, "var modelSeeds") {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// TestCopiesInStep checks that the copies of the calendar harness and the
// engine model used by the fuzz targets match their originals.
func TestCopiesInStep(t *testing.T) {
	for copyName, orig := range map[string]string{
		"calharness_test.go":  "../internal/calendar/harness_test.go",
		"calprogram_test.go":  "../internal/calendar/program_test.go",
		"enginemodel_test.go": "../engine/model_test.go",
	} {
		a, err := os.ReadFile(orig)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(copyName)
		if err != nil {
			t.Fatal(err)
		}
		na, nb := strings.Split(normalize(string(a)), "\n"), strings.Split(normalize(string(b)), "\n")
		for i := 0; i < len(na) || i < len(nb); i++ {
			var x, y string
			if i < len(na) {
				x = na[i]
			}
			if i < len(nb) {
				y = nb[i]
			}
			if x != y {
				t.Errorf("%s is out of step with %s at line %d of the normalized text:\n  %s\n  %s", copyName, orig, i+1, x, y)
				break
			}
		}
	}
}
