package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestdataTraces replays the project's conformance traces
// (testdata/fifo, testdata/lane) and compares each with its expected
// output as ../shared/conformance/check does: as many lines, and every
// key of an expected line present in the actual one with an equal value
// (0x strings without regard to case). CI also runs them through check,
// under every layout; here `go test ./...` alone catches a change of
// output.
func TestTestdataTraces(t *testing.T) {
	traces, err := filepath.Glob(filepath.Join("..", "..", "testdata", "*", "*.trace.jsonl"))
	if err != nil || len(traces) == 0 {
		t.Fatalf("no traces under testdata: %v", err)
	}
	for _, path := range traces {
		name := strings.TrimSuffix(filepath.Base(path), ".trace.jsonl")
		t.Run(filepath.Base(filepath.Dir(path))+"/"+name, func(t *testing.T) {
			in, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			var out bytes.Buffer
			if err := Run(in, &out); err != nil {
				t.Fatalf("replay: %v", err)
			}
			want := jsonLines(t, strings.TrimSuffix(path, ".trace.jsonl")+".expected.jsonl")
			got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(got) != len(want) {
				t.Fatalf("%d lines, want %d", len(got), len(want))
			}
			for i, w := range want {
				var g map[string]any
				if err := json.Unmarshal([]byte(got[i]), &g); err != nil {
					t.Fatalf("line %d: %v: %s", i+1, err, got[i])
				}
				for k, wv := range w {
					if !sameValue(g[k], wv) {
						t.Fatalf("line %d: %s = %v, want %v\n got  %s", i+1, k, g[k], wv, got[i])
					}
				}
			}
		})
	}
}

// jsonLines reads the objects of a JSON Lines file, skipping blank lines.
func jsonLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var objs []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var o map[string]any
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		objs = append(objs, o)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return objs
}

// sameValue is check's equality: values of one JSON type, equal; strings
// starting with 0x without regard to case; objects and arrays whole.
func sameValue(got, want any) bool {
	switch w := want.(type) {
	case string:
		g, ok := got.(string)
		if ok && strings.HasPrefix(w, "0x") {
			return strings.EqualFold(g, w)
		}
		return ok && g == w
	case float64:
		g, ok := got.(float64)
		return ok && g == w
	case bool:
		g, ok := got.(bool)
		return ok && g == w
	case nil:
		return got == nil
	}
	g, err1 := json.Marshal(got)
	w, err2 := json.Marshal(want)
	return err1 == nil && err2 == nil && bytes.Equal(g, w)
}
