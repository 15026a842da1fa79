package wal

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/timerlane/timerlane/internal/vfs"
)

const benchChanges = 10_000 // changes per block

// benchBodies returns n realistic block bodies of benchChanges changes.
func benchBodies(n int, schedOnly bool) [][]byte {
	g := newBodyGen(42)
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = g.block(nil, uint64(1000+i), benchChanges, schedOnly)
	}
	return bodies
}

var benchWorkloads = []struct {
	name      string
	schedOnly bool
}{
	{"schedule-empty-payload", true}, // every change schedules a timer with an empty payload
	{"mix", false},                   // 60% schedules, 20% cancels, 20% fires
}

// BenchmarkAppend is the WAL's sustained throughput on the real filesystem
// (a temporary directory): blocks of 10,000 timer changes, appended with an
// fsync per block (SyncEveryBlock), or with group commit. It reports timer
// changes per second and the compressed bytes per change on disk.
//
//	go test ./wal -run '^$' -bench BenchmarkAppend -benchtime 300x -count 3
func BenchmarkAppend(b *testing.B) {
	for _, w := range benchWorkloads {
		bodies := benchBodies(32, w.schedOnly)
		for _, c := range []struct {
			name string
			c    Compression
		}{{"s2", CompressS2}, {"zstd", CompressZstd}} {
			for _, p := range []struct {
				name string
				p    SyncPolicy
			}{{"fsync-per-block", SyncEveryBlock}, {"group-commit-5ms", SyncInterval(5 * time.Millisecond)}} {
				b.Run(fmt.Sprintf("%s/%s/%s", w.name, c.name, p.name), func(b *testing.B) {
					dir := b.TempDir()
					l, err := Open(vfs.OS, dir, Options{Compression: c.c, Sync: p.p})
					if err != nil {
						b.Fatal(err)
					}
					b.SetBytes(int64(len(bodies[0])))
					b.ReportAllocs()
					b.ResetTimer()
					for i := range b.N {
						if err := l.Append(uint64(i+1), bodies[i%len(bodies)]); err != nil {
							b.Fatal(err)
						}
					}
					if err := l.Sync(); err != nil {
						b.Fatal(err)
					}
					elapsed := b.Elapsed()
					b.StopTimer()
					l.Close()
					var onDisk int64
					names, _ := vfs.OS.List(dir)
					for _, n := range names {
						if _, ok := parseName(n, segSuffix); ok {
							s, _ := vfs.OS.Stat(dir + "/" + n)
							onDisk += s - segHeaderSize
						}
					}
					changes := float64(b.N) * benchChanges
					b.ReportMetric(changes/elapsed.Seconds(), "changes/s")
					b.ReportMetric(float64(onDisk)/changes, "disk-B/change")
				})
			}
		}
	}
}

// BenchmarkCodec is the measurement behind the choice of S2 (see the
// package documentation): each candidate compressing realistic 10,000-change
// block bodies, with the compressed bytes per change.
//
//	go test ./wal -run '^$' -bench BenchmarkCodec -count 3
func BenchmarkCodec(b *testing.B) {
	zf, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false))
	zd, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false))
	codecs := []struct {
		name string
		enc  func(dst, src []byte) []byte
	}{
		{"s2", func(dst, src []byte) []byte { return s2.Encode(dst[:cap(dst)], src) }},
		{"s2-better", func(dst, src []byte) []byte { return s2.EncodeBetter(dst[:cap(dst)], src) }},
		{"zstd-fastest", func(dst, src []byte) []byte { return zf.EncodeAll(src, dst[:0]) }},
		{"zstd-default", func(dst, src []byte) []byte { return zd.EncodeAll(src, dst[:0]) }},
	}
	for _, w := range benchWorkloads {
		bodies := benchBodies(16, w.schedOnly)
		for _, c := range codecs {
			b.Run(w.name+"/"+c.name, func(b *testing.B) {
				dst := make([]byte, s2.MaxEncodedLen(2*len(bodies[0])))
				b.SetBytes(int64(len(bodies[0])))
				b.ReportAllocs()
				var raw, comp int64
				for i := range b.N {
					body := bodies[i%len(bodies)]
					out := c.enc(dst, body)
					raw += int64(len(body))
					comp += int64(len(out))
				}
				b.ReportMetric(float64(comp)/float64(b.N*benchChanges), "B/change")
				b.ReportMetric(float64(raw)/float64(b.N*benchChanges), "raw-B/change")
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/block")
			})
		}
	}
}

// BenchmarkOpen is recovery: a snapshot of 1 MiB state plus 100 records of
// 10,000 changes after it (about 50 MB of log), on the real filesystem.
//
//	go test ./wal -run '^$' -bench BenchmarkOpen -count 3
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	l, err := Open(vfs.OS, dir, Options{Sync: SyncNone})
	if err != nil {
		b.Fatal(err)
	}
	bodies := benchBodies(16, false)
	for h := uint64(1); h <= 10; h++ {
		l.Append(h, bodies[h%16])
	}
	if err := l.WriteSnapshot(10, bytes.NewReader(stateFor(10)[:1<<20])); err != nil {
		b.Fatal(err)
	}
	for h := uint64(11); h <= 110; h++ {
		l.Append(h, bodies[h%16])
	}
	l.Close()
	b.ReportAllocs()
	for b.Loop() {
		l, err := Open(vfs.OS, dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		if err := l.Replay(func(uint64, []byte) error { n++; return nil }); err != nil || n != 100 {
			b.Fatal(n, err)
		}
		l.Close()
	}
}
