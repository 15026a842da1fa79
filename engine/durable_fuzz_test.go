package engine

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/timerlane/timerlane/internal/vfs"
)

// FuzzApplyRecord applies arbitrary bytes as the first log record of a new
// engine: ErrBadRecord (or a snapshot-decoding error inside it), or
// ErrConfigMismatch for bytes of the configuration changed, never a
// panic, and when it applies, the incremental root equals the root from
// scratch.
func FuzzApplyRecord(f *testing.F) {
	cfg := durableConfig(PolicyLane, [3]uint64{16, 8, 3})
	d, err := openFS(vfs.NewMem(), "db", cfg, quietLog)
	if err != nil {
		f.Fatal(err)
	}
	p := &program{r: rand.New(rand.NewPCG(3, 3)), policy: PolicyLane}
	for h := uint64(1); h <= 3; h++ {
		p.block(f, d, h)
		f.Add(bytes.Clone(d.dur.buf.Last()))
	}
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, rec []byte) {
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.applyRecord(rec); err != nil {
			if !errors.Is(err, ErrBadRecord) && !errors.Is(err, ErrConfigMismatch) {
				t.Fatalf("error %v is neither ErrBadRecord nor ErrConfigMismatch", err)
			}
			return
		}
		if e.Root() != e.scratchRoot() {
			t.Fatal("the applied record's state has an inconsistent root")
		}
	})
}
