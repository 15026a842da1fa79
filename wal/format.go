package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/xxh3"
)

// On-disk constants. See the package documentation for the layouts.
const (
	segMagic      = "TLWAL\x00\x00\x01" // version 1
	snapMagic     = "TLSNAP\x00\x01"    // version 1
	segHeaderSize = 32
	recHeaderSize = 4 + 8 + 1 + 8 // length, checksum, kind, height
	recMinLength  = 1 + 8         // a record's length field counts kind, height and body

	snapHeaderSize = 32
	chunkHeader    = 8 + 4 + 4 // checksum, compressed length, uncompressed length
	snapEndSize    = chunkHeader + 8 + 8
	snapChunkSize  = 1 << 20 // uncompressed bytes per snapshot chunk when writing
	snapChunkMax   = 4 << 20 // largest chunk a reader accepts

	flagGenesis = 1 << 0 // a segment's header flag: the log starts here (no snapshot before it)

	segSuffix  = ".wal"
	snapSuffix = ".snap"
	tmpSuffix  = ".snap.tmp"
	// segTmpSuffix is a segment that Repair is rewriting, until it is
	// renamed into place; Open removes one a crash left, as it does a
	// temporary snapshot.
	segTmpSuffix = ".wal.tmp"
)

// Record kinds: a block body, stored raw or compressed with one codec.
const (
	kindRaw  = 1
	kindS2   = 2
	kindZstd = 3
)

// Compression selects how Append compresses block bodies (and how
// WriteSnapshot compresses snapshot chunks). A log reads every kind
// whatever its setting.
type Compression uint8

const (
	// CompressS2 is the default (see the package documentation for the
	// measurement behind the choice).
	CompressS2 Compression = iota
	// CompressZstd is zstd at its fastest level: bodies 6-9% smaller than
	// S2's on the engine's changes, at about 4 times the CPU (the package
	// documentation's table).
	CompressZstd
	// CompressNone stores bodies as they are.
	CompressNone
)

func (c Compression) kind() byte {
	switch c {
	case CompressZstd:
		return kindZstd
	case CompressNone:
		return kindRaw
	default:
		return kindS2
	}
}

func segmentName(first uint64) string { return fmt.Sprintf("%020d%s", first, segSuffix) }
func snapshotName(h uint64) string    { return fmt.Sprintf("%020d%s", h, snapSuffix) }
func tempName(h uint64) string        { return fmt.Sprintf("%020d%s", h, tmpSuffix) }

// headerSaysFirst is the reason of a segment whose whole header names
// another first record than its file name does.
func headerSaysFirst(first uint64) string {
	return fmt.Sprintf("segment header says its first record is %d", first)
}

// parseName returns the height in a file name of the given suffix.
func parseName(name, suffix string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	h, err := strconv.ParseUint(digits, 10, 64)
	return h, err == nil
}

// formatError is a decoding failure at an offset of the bytes decoded;
// incomplete says the bytes ended inside the thing decoded (a torn write
// looks like that).
type formatError struct {
	off        int64
	reason     string
	incomplete bool
}

func (e *formatError) Error() string { return fmt.Sprintf("offset %d: %s", e.off, e.reason) }

func errAt(off int64, format string, args ...any) *formatError {
	return &formatError{off: off, reason: fmt.Sprintf(format, args...)}
}

func incompleteAt(off int64, format string, args ...any) *formatError {
	return &formatError{off: off, reason: fmt.Sprintf(format, args...), incomplete: true}
}

// appendSegmentHeader appends the 32-byte header of a segment whose first
// record has height first.
func appendSegmentHeader(dst []byte, first uint64, flags uint64) []byte {
	start := len(dst)
	dst = append(dst, segMagic...)
	dst = binary.LittleEndian.AppendUint64(dst, first)
	dst = binary.LittleEndian.AppendUint64(dst, flags)
	return binary.LittleEndian.AppendUint64(dst, xxh3.Hash(dst[start:]))
}

// decodeSegmentHeader checks a segment header and returns its first height
// and flags.
func decodeSegmentHeader(b []byte) (first, flags uint64, err *formatError) {
	if len(b) < segHeaderSize {
		return 0, 0, incompleteAt(0, "segment header: %d of %d bytes", len(b), segHeaderSize)
	}
	if string(b[:8]) != segMagic {
		return 0, 0, errAt(0, "segment header: bad magic %q", b[:8])
	}
	if got, want := binary.LittleEndian.Uint64(b[24:32]), xxh3.Hash(b[:24]); got != want {
		return 0, 0, errAt(0, "segment header: checksum %016x, computed %016x", got, want)
	}
	first = binary.LittleEndian.Uint64(b[8:16])
	flags = binary.LittleEndian.Uint64(b[16:24])
	if flags&^flagGenesis != 0 {
		return 0, 0, errAt(0, "segment header: unknown flags %#x", flags)
	}
	return first, flags, nil
}

// record is a decoded record frame; payload aliases the decoded bytes.
type record struct {
	kind    byte
	height  uint64
	payload []byte // the body as stored (compressed per kind)
	size    int    // bytes the frame occupies
}

// decodeRecord decodes the record frame at the start of b. maxLen bounds
// the length field. It checks the checksum and the kind but does not
// decompress.
func decodeRecord(b []byte, maxLen uint32) (record, *formatError) {
	if len(b) < recHeaderSize {
		return record{}, incompleteAt(0, "record header: %d of %d bytes", len(b), recHeaderSize)
	}
	length := binary.LittleEndian.Uint32(b[0:4])
	if length < recMinLength {
		return record{}, errAt(0, "record length %d below the minimum %d", length, recMinLength)
	}
	if length > maxLen {
		return record{}, errAt(0, "record length %d above the limit %d", length, maxLen)
	}
	end := 12 + int64(length)
	if int64(len(b)) < end {
		return record{}, incompleteAt(0, "record of %d bytes, %d present", end, len(b))
	}
	if got, want := binary.LittleEndian.Uint64(b[4:12]), xxh3.Hash(b[12:end]); got != want {
		return record{}, errAt(0, "record checksum %016x, computed %016x", got, want)
	}
	r := record{kind: b[12], height: binary.LittleEndian.Uint64(b[13:21]), payload: b[21:end], size: int(end)}
	if r.kind < kindRaw || r.kind > kindZstd {
		return record{}, errAt(0, "record kind %d unknown", r.kind)
	}
	return r, nil
}

// recordSums folds the checksums that the record frames in b store, in
// order, without checking them (decodeRecord does): two runs of whole
// records fold alike only if they hold the same records, which a reader
// that reads a range twice compares at no cost beyond the walk. ok is
// false if b does not split into frames.
func recordSums(b []byte) (sum uint64, ok bool) {
	for off := int64(0); off < int64(len(b)); {
		if int64(len(b))-off < 12 {
			return 0, false
		}
		end := off + 12 + int64(binary.LittleEndian.Uint32(b[off:]))
		if end > int64(len(b)) {
			return 0, false
		}
		sum = sum*0x9e3779b97f4a7c15 + binary.LittleEndian.Uint64(b[off+4:]) // order counts
		off = end
	}
	return sum, true
}

// appendRecord appends the frame of a record holding body, compressed as c
// says (or raw, if compression does not make it smaller).
func appendRecord(dst []byte, height uint64, body []byte, c Compression, zenc *zstd.Encoder) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recHeaderSize)...)
	kind := c.kind()
	switch kind {
	case kindS2:
		need := s2.MaxEncodedLen(len(body))
		if need < 0 {
			kind = kindRaw
			break
		}
		dst = grow(dst, need)
		enc := s2.Encode(dst[len(dst):len(dst)+need], body)
		dst = dst[:len(dst)+len(enc)]
	case kindZstd:
		dst = zenc.EncodeAll(body, dst)
	}
	if kind == kindRaw || len(dst)-start-recHeaderSize >= len(body) {
		kind = kindRaw
		dst = append(dst[:start+recHeaderSize], body...)
	}
	rec := dst[start:]
	binary.LittleEndian.PutUint32(rec[0:4], uint32(len(rec)-12))
	rec[12] = kind
	binary.LittleEndian.PutUint64(rec[13:21], height)
	binary.LittleEndian.PutUint64(rec[4:12], xxh3.Hash(rec[12:]))
	return dst
}

// grow makes room for n more bytes after len(b) without changing len(b).
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n+len(b)/4)
	copy(nb, b)
	return nb
}

// zstd decoders by output limit (a decoder's limit is fixed when it is
// made, and it bounds the total output of DecodeAll, frames and all).
var zstdDecoders struct {
	sync.Mutex
	m map[int]*zstd.Decoder
}

func zstdDecoder(limit int) *zstd.Decoder {
	zstdDecoders.Lock()
	defer zstdDecoders.Unlock()
	if d := zstdDecoders.m[limit]; d != nil {
		return d
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(limit)))
	if err != nil {
		panic(err)
	}
	if zstdDecoders.m == nil {
		zstdDecoders.m = map[int]*zstd.Decoder{}
	}
	zstdDecoders.m[limit] = d
	return d
}

func newZstdEncoder() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false))
	if err != nil {
		panic(err)
	}
	return e
}

var errTooLarge = errors.New("decoded size above the limit")

// decodeBody decompresses a stored body of the given kind into dst (reused
// if large enough); the result may alias payload for a raw body. It never
// returns more than maxBody bytes.
func decodeBody(dst []byte, kind byte, payload []byte, maxBody int) ([]byte, error) {
	switch kind {
	case kindRaw:
		if len(payload) > maxBody {
			return nil, errTooLarge
		}
		return payload, nil
	case kindS2:
		n, err := s2.DecodedLen(payload)
		if err != nil {
			return nil, err
		}
		if n > maxBody {
			return nil, errTooLarge
		}
		if cap(dst) < n {
			dst = make([]byte, n)
		}
		return s2.Decode(dst[:n], payload)
	case kindZstd:
		// A decoder limit also caps the frame window it accepts, and a
		// frame's window can exceed its content (1 KiB at least): decode
		// with a limit of at least 16 MiB and check the size after.
		out, err := zstdDecoder(max(maxBody, 16<<20)).DecodeAll(payload, dst[:0])
		if err != nil {
			return nil, err
		}
		if len(out) > maxBody {
			return nil, errTooLarge
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown kind %d", kind)
}
