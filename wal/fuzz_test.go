package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/timerlane/timerlane/internal/vfs"
)

// mutate cuts b to cut bytes (if cut < len(b)) and flips bit flip-1 of
// what is left (if flip > 0), returning a copy.
func mutate(b []byte, cut, flip uint32) []byte {
	out := bytes.Clone(b)
	if int(cut) < len(out) {
		out = out[:cut]
	}
	if flip > 0 && len(out) > 0 {
		i := int(flip-1) % (len(out) * 8)
		out[i/8] ^= 1 << (i % 8)
	}
	return out
}

var fuzzCompressions = []Compression{CompressS2, CompressZstd, CompressNone}

// FuzzRecordDecode: the record decoder on arbitrary bytes never panics; on
// a real record that was cut or had a bit flipped, it fails (it never
// returns a record that differs from what was written); and a log whose
// last segment was cut or flipped either fails to open with a
// *CorruptError or recovers exactly the state after one of its blocks.
func FuzzRecordDecode(f *testing.F) {
	f.Add([]byte{}, uint64(1), []byte("body"), uint8(0), uint32(1000), uint32(0))
	f.Add([]byte{9, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 1, 0, 0, 0, 0, 0, 0, 0}, uint64(7), []byte{}, uint8(1), uint32(5), uint32(0))
	f.Add(bytes.Repeat([]byte{0xff}, 40), uint64(1<<40), bytes.Repeat([]byte("timer"), 50), uint8(0), uint32(1000), uint32(13*8+2))
	f.Add([]byte("TLWAL"), uint64(3), bytes.Repeat([]byte("timer"), 50), uint8(1), uint32(30), uint32(0))
	f.Add([]byte{}, uint64(3), []byte("z"), uint8(2), uint32(1000), uint32(1))
	g := newBodyGen(3)
	f.Add([]byte{}, uint64(11), g.block(nil, 11, 20, false), uint8(0), uint32(200), uint32(77))
	f.Fuzz(func(t *testing.T, raw []byte, height uint64, body []byte, comp uint8, cut, flip uint32) {
		// Arbitrary bytes: an error or a record, never a panic.
		if r, ferr := decodeRecord(raw, 1<<20); ferr == nil {
			if r.size > len(raw) || r.kind < kindRaw || r.kind > kindZstd {
				t.Fatalf("record %+v from %d bytes", r, len(raw))
			}
			_, _ = decodeBody(nil, r.kind, r.payload, 1<<20)
		}
		if height == 0 {
			height = 1
		}
		c := fuzzCompressions[int(comp)%len(fuzzCompressions)]
		var zenc = newZstdEncoder()
		defer zenc.Close()
		rec := appendRecord(nil, height, body, c, zenc)
		mut := mutate(rec, cut, flip)
		r, ferr := decodeRecord(mut, 1<<30)
		if ferr == nil {
			if !bytes.Equal(mut[:r.size], rec) {
				t.Fatalf("a damaged record decoded: cut %d flip %d", cut, flip)
			}
			got, err := decodeBody(nil, r.kind, r.payload, len(body))
			if err != nil || r.height != height || !bytes.Equal(got, body) {
				t.Fatalf("record round trip: %d %q %v", r.height, got, err)
			}
		} else if bytes.Equal(mut, rec) {
			t.Fatalf("an intact record failed: %v", ferr)
		}

		// The same damage to the last segment of a small log.
		m := vfs.NewMem()
		l, err := Open(m, "/wal", Options{SegmentSize: 1 << 20, Compression: c, Logf: quiet})
		if err != nil {
			t.Fatal(err)
		}
		for h := uint64(1); h <= 6; h++ {
			if err := l.Append(h, bodyFor(h)); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
		path := "/wal/" + segmentName(1)
		data, _ := vfs.ReadFile(m, path)
		overwrite(t, m, path, mutate(data, cut%uint32(len(data)+1), flip))
		l, err = Open(m, "/wal", Options{Logf: quiet})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open of a damaged log: %v", err)
			}
			return
		}
		defer l.Close()
		got, err := checkRecovered(l)
		if err != nil {
			t.Fatalf("damaged log recovered a wrong state: %v", err)
		}
		if got.snap != 0 || got.last > 6 {
			t.Fatalf("recovered %+v", got)
		}
	})
}

// FuzzSnapshotDecode: the snapshot decoder on arbitrary bytes never
// panics; a real snapshot that was cut or had a bit flipped fails to
// decode (it never yields a payload other than the one written).
func FuzzSnapshotDecode(f *testing.F) {
	f.Add([]byte{}, []byte("state"), uint64(5), uint8(0), uint8(3), uint32(1000), uint32(0))
	f.Add([]byte("TLSNAP\x00\x01"), []byte{}, uint64(1), uint8(1), uint8(0), uint32(1000), uint32(9))
	f.Add(bytes.Repeat([]byte{0}, 64), bytes.Repeat([]byte("timers"), 300), uint64(99), uint8(0), uint8(17), uint32(500), uint32(0))
	f.Add([]byte{}, bytes.Repeat([]byte("timers"), 300), uint64(99), uint8(1), uint8(200), uint32(1<<20), uint32(8*40+3))
	f.Add([]byte{}, []byte("0123456789"), uint64(2), uint8(2), uint8(1), uint32(1<<20), uint32(8*60+1))
	f.Fuzz(func(t *testing.T, raw, payload []byte, height uint64, comp, chunk uint8, cut, flip uint32) {
		// Arbitrary bytes: an error or a payload, never a panic.
		if r, err := newSnapReader(bytes.NewReader(raw), int64(len(raw))); err == nil {
			_, _ = io.Copy(io.Discard, r)
		}
		c := fuzzCompressions[int(comp)%len(fuzzCompressions)]
		zenc := newZstdEncoder()
		defer zenc.Close()
		var buf bytes.Buffer
		if err := encodeSnapshotChunks(&buf, height, bytes.NewReader(payload), c, zenc, 1+int(chunk)); err != nil {
			t.Fatal(err)
		}
		snap := buf.Bytes()
		mut := mutate(snap, cut, flip)
		got, h, err := decodeAll(mut)
		if err == nil {
			if !bytes.Equal(mut, snap) {
				t.Fatalf("a damaged snapshot decoded (cut %d flip %d)", cut, flip)
			}
			if h != height || !bytes.Equal(got, payload) {
				t.Fatalf("snapshot round trip: height %d, %d bytes", h, len(got))
			}
		} else {
			var fe *formatError
			if !errors.As(err, &fe) {
				t.Fatalf("decoding bytes failed with a non-format error: %v", err)
			}
			if bytes.Equal(mut, snap) {
				t.Fatalf("an intact snapshot failed: %v", err)
			}
		}
	})
}

func decodeAll(b []byte) ([]byte, uint64, error) {
	r, err := newSnapReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, 0, err
	}
	var out bytes.Buffer
	if _, err := io.Copy(&out, r); err != nil {
		return nil, 0, err
	}
	return out.Bytes(), r.height, nil
}

func TestMutate(t *testing.T) {
	b := []byte{0, 0, 0}
	for _, tc := range []struct {
		cut, flip uint32
		want      string
	}{
		{10, 0, "000000"}, {2, 0, "0000"}, {10, 1, "010000"}, {10, 9, "000100"}, {1, 9, "01"},
	} {
		if got := fmt.Sprintf("%x", mutate(b, tc.cut, tc.flip)); got != tc.want {
			t.Errorf("mutate(%d, %d) = %s, want %s", tc.cut, tc.flip, got, tc.want)
		}
	}
}
