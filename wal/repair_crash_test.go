package wal

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/timerlane/timerlane/internal/vfs"
	"github.com/timerlane/timerlane/internal/vfs/errorfs"
)

// TestRepairCrashMatrix: a machine that crashes while Repair runs leaves a
// log that a second Repair makes openable, at the same block as a Repair
// that ran undisturbed. The logs, with and without records kept below the
// newest snapshot, have rolled back once (ROLLBACKS). The damages are a
// byte of the middle record of each segment, of each segment's header, of
// each snapshot, of NEWEST and of ROLLBACKS; the crash comes before each
// operation of the first Repair that changes the filesystem, and at its
// end, under each crash model.
func TestRepairCrashMatrix(t *testing.T) {
	for _, opts := range []Options{{SegmentSize: 500}, {SegmentSize: 500, KeepRecords: 20}} {
		t.Run(fmt.Sprintf("keep=%d", opts.KeepRecords), func(t *testing.T) {
			opts.Logf = quiet
			repairCrashes(t, opts)
		})
	}
}

func repairCrashes(t *testing.T, opts Options) {
	base := vfs.NewMem()
	l := buildLog(t, base, opts, 34, 8, 19)
	if err := l.Truncate(30, writeState(30)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, got := openCheck(t, base.Crash(vfs.CrashOptions{}), "/wal", opts); got.last != 30 {
		t.Fatalf("the log before any damage recovers to %d after a crash, not 30: it must be durable", got.last)
	}
	type damage struct {
		name string
		path string
		off  int64
	}
	var damages []damage
	for _, s := range segLayout(t, base, "/wal") {
		damages = append(damages, damage{"header of " + s.name, "/wal/" + s.name, 3})
		data, _ := vfs.ReadFile(base, "/wal/"+s.name)
		off := int64(segHeaderSize)
		for h := s.first; h < (s.first+s.last)/2; h++ {
			r, _ := decodeRecord(data[off:], 1<<30)
			off += int64(r.size)
		}
		damages = append(damages, damage{fmt.Sprintf("record %d of %s", (s.first+s.last)/2, s.name), "/wal/" + s.name, off + 10})
	}
	for _, h := range snapshotsIn(t, base, "/wal") {
		p := "/wal/" + snapshotName(h)
		size, _ := base.Stat(p)
		damages = append(damages, damage{"snapshot " + snapshotName(h), p, size / 2})
	}
	for _, name := range []string{newestName, rollbacksName} {
		if _, err := base.Stat("/wal/" + name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		damages = append(damages, damage{name, "/wal/" + name, 1})
	}
	points, images, repaired := 0, 0, 0
	for _, d := range damages {
		img := base.Clone()
		flipBit(t, img, d.path, d.off, 0)
		if l, err := Open(img.Clone(), "/wal", opts); err == nil {
			l.Close()
			continue // damage that Open does not see: nothing to repair
		}
		repaired++
		want, ok := repairedLast(t, img.Clone(), opts, d.name)
		if !ok {
			continue
		}
		m := img.Clone()
		var mu sync.Mutex
		var crashed []*vfs.MemFS
		inj := errorfs.Func(func(op errorfs.Op) errorfs.Fault {
			if errorfs.Writes.Has(op.Kind) {
				mu.Lock()
				defer mu.Unlock()
				for _, c := range crashes(m, uint64(len(crashed))) {
					crashed = append(crashed, c)
				}
				points++
			}
			return errorfs.Fault{}
		})
		if _, err := Repair(errorfs.Wrap(m, inj), "/wal", opts); err != nil {
			t.Fatalf("%s: repair: %v", d.name, err)
		}
		for _, c := range crashes(m, 0) {
			crashed = append(crashed, c)
		}
		for i, c := range crashed {
			if _, err := Repair(c, "/wal", opts); err != nil {
				t.Fatalf("%s, crash image %d: the second repair: %v\n%s", d.name, i, err, c)
			}
			l, err := Open(c, "/wal", opts)
			if err != nil {
				t.Fatalf("%s, crash image %d: open after the second repair: %v\n%s", d.name, i, err, c)
			}
			got, err := checkRecovered(l)
			l.Close()
			if err != nil || got.last != want {
				t.Fatalf("%s, crash image %d: recovered %+v, %v; an undisturbed repair recovers to %d\n%s", d.name, i, got, err, want, c)
			}
			images++
		}
	}
	t.Logf("%d damages (%d that Open fails on), %d crash points, %d crash images repaired", len(damages), repaired, points, images)
}

// repairedLast repairs m and returns the block the log then recovers to;
// ok is false for damage that Repair refuses to repair (ErrNoBase).
func repairedLast(t *testing.T, m *vfs.MemFS, opts Options, what string) (uint64, bool) {
	t.Helper()
	if _, err := Repair(m, "/wal", opts); errors.Is(err, ErrNoBase) {
		return 0, false
	} else if err != nil {
		t.Fatalf("%s: repair: %v", what, err)
	}
	l, got := openCheck(t, m, "/wal", opts)
	l.Close()
	return got.last, true
}
