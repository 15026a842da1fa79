package fuzz

import (
	"bytes"
	"errors"
	"testing"

	"github.com/timerlane/timerlane/engine"
)

// FuzzRestore feeds damaged and arbitrary snapshots to engine.Restore: an
// error wrapping ErrSnapshot, never a panic; and a snapshot that restores
// writes itself back byte for byte. A version-1 snapshot (no tree image)
// is written back in version 2, which must then write itself back.
func FuzzRestore(f *testing.F) {
	cfg := engine.DefaultConfig()
	cfg.Policy, cfg.StateRoot = engine.PolicyLane, true
	for _, seed := range [][]byte{{}, []byte("TLSNAP\x01"), snapshotOf(f, cfg, 0), snapshotOf(f, cfg, 3), snapshotOf(f, cfg, 12)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := engine.Restore(cfg, bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, engine.ErrSnapshot) {
				t.Fatalf("error %v does not wrap ErrSnapshot", err)
			}
			return
		}
		var out bytes.Buffer
		if err := e.WriteSnapshot(&out); err != nil {
			t.Fatal(err)
		}
		if bytes.HasPrefix(data, []byte("TLSNAP\x01")) {
			data = bytes.Clone(out.Bytes()) // the upgrade: now a fixed point
			e, err := engine.Restore(cfg, bytes.NewReader(data))
			if err != nil {
				t.Fatalf("the version-2 writing of a version-1 snapshot does not restore: %v", err)
			}
			out.Reset()
			if err := e.WriteSnapshot(&out); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("restored and written again, the snapshot changed:\n%x\n%x", data, out.Bytes())
		}
	})
}

// snapshotOf runs a small lane program for the given number of blocks and
// returns its snapshot.
func snapshotOf(f *testing.F, cfg engine.Config, blocks uint64) []byte {
	e, err := engine.New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	a := engine.Address{0xaa}
	e.Ledger().Credit(a, engine.Amount{Lo: 1 << 40})
	for h := uint64(1); h <= blocks; h++ {
		e.BeginBlock(h)
		tx, _ := e.Begin(a, h)
		tx.ScheduleFees(h+2, []byte{byte(h)}, &engine.Fees{Set: engine.HasGasLimit | engine.HasMaxPriorityFee, GasLimit: 90_000, MaxPriorityFee: engine.Amount{Lo: h}})
		tx.Schedule(h+1, nil)
		tx.Commit()
		e.EndBlock(nopExecutor{})
		e.Commit()
	}
	var b bytes.Buffer
	if err := e.WriteSnapshot(&b); err != nil {
		f.Fatal(err)
	}
	return b.Bytes()
}

type nopExecutor struct{}

func (nopExecutor) Execute(engine.Tx, *engine.Delivery) (engine.Usage, error) {
	return engine.Usage{Cycles: 10}, nil
}
