package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
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
			got := jsonLines(t, "output", &out)
			want := jsonLines(t, strings.TrimSuffix(path, ".trace.jsonl")+".expected.jsonl", nil)
			if len(got) != len(want) {
				t.Fatalf("%d lines, want %d", len(got), len(want))
			}
			for i, w := range want {
				for k, wv := range w {
					if gv, ok := got[i][k]; !ok || !sameValue(gv, wv) {
						t.Fatalf("line %d: %s = %v, want %v", i+1, k, gv, wv)
					}
				}
			}
		})
	}
}

// jsonLines reads the objects of JSON Lines from r, or from the file name
// when r is nil, skipping blank lines. Numbers stay exact (json.Number):
// heights near 2^64 do not fit a float64.
func jsonLines(t *testing.T, name string, r io.Reader) []map[string]any {
	t.Helper()
	if r == nil {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r = f
	}
	var objs []map[string]any
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		var o map[string]any
		if err := d.Decode(&o); err != nil {
			t.Fatalf("%s:%d: %v", name, n, err)
		}
		if d.More() { // json.Unmarshal refused this; a Decoder stops after one value
			t.Fatalf("%s:%d: data after the object", name, n)
		}
		objs = append(objs, o)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return objs
}

// sameValue is check's equality: strings starting with 0x without regard
// to case, every other value of the same JSON type and equal.
func sameValue(got, want any) bool {
	if w, ok := want.(string); ok && strings.HasPrefix(w, "0x") {
		g, ok := got.(string)
		return ok && strings.EqualFold(g, w)
	}
	return reflect.DeepEqual(got, want)
}
