package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/timerlane/timerlane/internal/vfs"
)

// bodyFor is the deterministic body of block h in tests: 0 to ~400 bytes,
// some compressible, some not, some empty.
func bodyFor(h uint64) []byte {
	if b, ok := bodyCache.Load(h); ok {
		return b.([]byte)
	}
	b := makeBody(h)
	bodyCache.Store(h, b)
	return b
}

var bodyCache, stateCache sync.Map

func makeBody(h uint64) []byte {
	r := rand.New(rand.NewPCG(h, 17))
	n := r.IntN(400)
	if h%7 == 0 {
		n = 0
	}
	b := make([]byte, n)
	if h%2 == 0 {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
	} else {
		for i := range b {
			b[i] = "timerlane"[i%9] + byte(h)
		}
	}
	return b
}

// stateFor is the deterministic snapshot payload of the state after block
// h: more than one snapshot chunk for some heights.
func stateFor(h uint64) []byte {
	if b, ok := stateCache.Load(h); ok {
		return b.([]byte)
	}
	b := makeState(h)
	stateCache.Store(h, b)
	return b
}

func makeState(h uint64) []byte {
	r := rand.New(rand.NewPCG(h, 99))
	n := 100 + r.IntN(3000)
	if h%5 == 0 {
		n = snapChunkSize + 1234
	}
	b := make([]byte, n)
	for i := range b {
		if i%3 == 0 {
			b[i] = byte(r.Uint32())
		} else {
			b[i] = byte(i)
		}
	}
	return b
}

func quiet(string, ...any) {}

// encodeSnapshotChunks writes the snapshot file format of the state at
// height, read from src, to w, in chunks of chunkSize (WriteSnapshot's are
// snapChunkSize).
func encodeSnapshotChunks(w io.Writer, height uint64, src io.Reader, c Compression, zenc *zstd.Encoder, chunkSize int) error {
	sw := newSnapWriter(w, height, c, zenc, chunkSize)
	if _, err := io.Copy(sw, src); err != nil && sw.err == nil {
		return &sourceError{err}
	}
	return sw.Close()
}

// recovered is the state a Log recovered: snapshot height and the heights
// of the records after it, all checked against stateFor and bodyFor.
type recovered struct {
	snap uint64
	last uint64
}

// checkRecovered reads back everything l recovered and checks that it is
// exactly the state after some block: the snapshot's payload is
// stateFor(S), the records are bodyFor(S+1..L) with no gap.
func checkRecovered(l *Log) (recovered, error) {
	rec := l.Recovery()
	var got recovered
	h, r, ok, err := l.OpenSnapshot()
	if err != nil {
		return got, fmt.Errorf("OpenSnapshot: %w", err)
	}
	if ok {
		var buf bytes.Buffer
		_, err := buf.ReadFrom(r)
		r.Close()
		if err != nil {
			return got, fmt.Errorf("reading snapshot %d: %w", h, err)
		}
		if h != rec.SnapshotHeight {
			return got, fmt.Errorf("snapshot height %d, recovery says %d", h, rec.SnapshotHeight)
		}
		if !bytes.Equal(buf.Bytes(), stateFor(h)) {
			return got, fmt.Errorf("snapshot %d: wrong payload (%d bytes)", h, buf.Len())
		}
		got.snap = h
	} else if rec.SnapshotHeight != 0 {
		return got, fmt.Errorf("no snapshot, recovery says %d", rec.SnapshotHeight)
	}
	next := got.snap + 1
	got.last = got.snap
	n := 0
	err = l.Replay(func(height uint64, body []byte) error {
		if got.snap == 0 && n == 0 {
			next = height // a log without a snapshot starts at its first record
		}
		if height != next {
			return fmt.Errorf("replay: height %d, expected %d", height, next)
		}
		if !bytes.Equal(body, bodyFor(height)) {
			return fmt.Errorf("replay: height %d: wrong body", height)
		}
		got.last = height
		next++
		n++
		return nil
	})
	if err != nil {
		return got, err
	}
	if n != rec.Records {
		return got, fmt.Errorf("replayed %d records, recovery says %d", n, rec.Records)
	}
	if got.last != rec.LastHeight || got.last != l.LastHeight() {
		return got, fmt.Errorf("replayed to %d, recovery says %d, LastHeight %d", got.last, rec.LastHeight, l.LastHeight())
	}
	return got, nil
}

// openCheck opens the log in dir and checks what it recovered.
func openCheck(t testing.TB, fsys vfs.FS, dir string, opts Options) (*Log, recovered) {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = quiet
	}
	l, err := Open(fsys, dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	got, err := checkRecovered(l)
	if err != nil {
		t.Fatal(err)
	}
	return l, got
}

func appendRange(t testing.TB, l *Log, from, to uint64) {
	t.Helper()
	for h := from; h <= to; h++ {
		if err := l.Append(h, bodyFor(h)); err != nil {
			t.Fatalf("Append(%d): %v", h, err)
		}
	}
}

func snapshot(t testing.TB, l *Log, h uint64) {
	t.Helper()
	if err := l.WriteSnapshot(h, bytes.NewReader(stateFor(h))); err != nil {
		t.Fatalf("WriteSnapshot(%d): %v", h, err)
	}
}

func listDir(t testing.TB, fsys vfs.FS, dir string) []string {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func segmentsIn(t testing.TB, fsys vfs.FS, dir string) []string {
	return slices.DeleteFunc(listDir(t, fsys, dir), func(n string) bool {
		_, ok := parseName(n, segSuffix)
		return !ok
	})
}

// flipBit flips one bit of a file in a MemFS (as a durable change).
func flipBit(t testing.TB, m *vfs.MemFS, path string, off int64, bit uint) {
	t.Helper()
	b, err := vfs.ReadFile(m, path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 1 << bit
	overwrite(t, m, path, b)
}

func overwrite(t testing.TB, fsys vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fsys.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func asCorrupt(err error) *CorruptError {
	var ce *CorruptError
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}

// recordOffset returns the offset of the record of height h in segment
// data, whose records before it are whole.
func recordOffset(t testing.TB, data []byte, h uint64) int64 {
	t.Helper()
	for off := int64(segHeaderSize); off < int64(len(data)); {
		r, ferr := decodeRecord(data[off:], maxRecordLength)
		if ferr != nil {
			t.Fatalf("no record %d: %v at offset %d", h, ferr, off)
		}
		if r.height == h {
			return off
		}
		off += int64(r.size)
	}
	t.Fatalf("no record %d", h)
	return 0
}
