package wal

import (
	"encoding/binary"
	"errors"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/xxh3"
)

// sourceError is a failure to read the caller's snapshot stream (as
// opposed to a failure to write the snapshot file).
type sourceError struct{ err error }

func (e *sourceError) Error() string { return "reading the snapshot source: " + e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// encodeSnapshot writes the snapshot file format for the state at height,
// read from src, to w.
func encodeSnapshot(w io.Writer, height uint64, src io.Reader, c Compression, zenc *zstd.Encoder) error {
	return encodeSnapshotChunks(w, height, src, c, zenc, snapChunkSize)
}

// encodeSnapshotChunks is encodeSnapshot with a chunk size (tests use small
// ones).
func encodeSnapshotChunks(w io.Writer, height uint64, src io.Reader, c Compression, zenc *zstd.Encoder, chunkSize int) error {
	hdr := make([]byte, 0, snapHeaderSize)
	hdr = append(hdr, snapMagic...)
	hdr = binary.LittleEndian.AppendUint64(hdr, height)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(c.kind()))
	hdr = binary.LittleEndian.AppendUint64(hdr, xxh3.Hash(hdr))
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	in := make([]byte, chunkSize)
	var frame []byte
	hasher := xxh3.New()
	var total uint64
	for {
		n, rerr := io.ReadFull(src, in)
		if n > 0 {
			chunk := in[:n]
			hasher.Write(chunk)
			total += uint64(n)
			frame = appendChunk(frame[:0], chunk, c, zenc)
			if _, err := w.Write(frame); err != nil {
				return err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return &sourceError{rerr}
		}
	}
	end := make([]byte, snapEndSize)
	binary.LittleEndian.PutUint64(end[16:24], total)
	binary.LittleEndian.PutUint64(end[24:32], hasher.Sum64())
	binary.LittleEndian.PutUint64(end[0:8], xxh3.Hash(end[8:]))
	_, err := w.Write(end)
	return err
}

// appendChunk appends the frame of one snapshot chunk; a chunk that does not
// compress is stored raw (and then its two lengths are equal).
func appendChunk(dst, chunk []byte, c Compression, zenc *zstd.Encoder) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, chunkHeader)...)
	switch c.kind() {
	case kindS2:
		need := s2.MaxEncodedLen(len(chunk))
		dst = grow(dst, need)
		enc := s2.Encode(dst[len(dst):len(dst)+need], chunk)
		dst = dst[:len(dst)+len(enc)]
	case kindZstd:
		dst = zenc.EncodeAll(chunk, dst)
	}
	if len(dst)-start-chunkHeader >= len(chunk) || c.kind() == kindRaw {
		dst = append(dst[:start+chunkHeader], chunk...)
	}
	f := dst[start:]
	binary.LittleEndian.PutUint32(f[8:12], uint32(len(f)-chunkHeader))
	binary.LittleEndian.PutUint32(f[12:16], uint32(len(chunk)))
	binary.LittleEndian.PutUint64(f[0:8], xxh3.Hash(f[8:]))
	return dst
}

// snapReader reads the payload of a snapshot file, checking every chunk's
// checksum as it goes and, at the end, the payload's length and checksum
// and that nothing follows the end frame. Decoding failures are
// *formatError; failures of src pass through.
type snapReader struct {
	src    io.ReaderAt
	size   int64
	off    int64
	height uint64
	codec  byte
	hasher *xxh3.Hasher
	total  uint64
	buf    []byte // compressed chunk
	dec    []byte // decompressed chunk
	out    []byte // unread part of dec
	err    error  // sticky
}

// newSnapReader checks the header of a snapshot file of the given size.
func newSnapReader(src io.ReaderAt, size int64) (*snapReader, error) {
	r := &snapReader{src: src, size: size, hasher: xxh3.New()}
	hdr := make([]byte, snapHeaderSize)
	if err := r.readAt(hdr, 0, "snapshot header"); err != nil {
		return nil, err
	}
	if string(hdr[:8]) != snapMagic {
		return nil, errAt(0, "snapshot header: bad magic %q", hdr[:8])
	}
	if got, want := binary.LittleEndian.Uint64(hdr[24:32]), xxh3.Hash(hdr[:24]); got != want {
		return nil, errAt(0, "snapshot header: checksum %016x, computed %016x", got, want)
	}
	r.height = binary.LittleEndian.Uint64(hdr[8:16])
	codec := binary.LittleEndian.Uint64(hdr[16:24])
	if codec < kindRaw || codec > kindZstd {
		return nil, errAt(0, "snapshot header: codec %d unknown", codec)
	}
	r.codec = byte(codec)
	r.off = snapHeaderSize
	return r, nil
}

// readAt reads exactly len(b) bytes at off, or fails with an incomplete
// formatError if the file is shorter.
func (r *snapReader) readAt(b []byte, off int64, what string) error {
	if off+int64(len(b)) > r.size {
		return incompleteAt(off, "%s: %d bytes needed, %d present", what, len(b), max(0, r.size-off))
	}
	n, err := r.src.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return incompleteAt(off, "%s: %d bytes needed, %d read", what, len(b), n)
	}
	return err
}

func (r *snapReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.err = r.next()
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// next decodes the next chunk into r.out, or checks the end frame and
// returns io.EOF.
func (r *snapReader) next() error {
	var h [chunkHeader]byte
	if err := r.readAt(h[:], r.off, "snapshot chunk header"); err != nil {
		return err
	}
	clen := binary.LittleEndian.Uint32(h[8:12])
	ulen := binary.LittleEndian.Uint32(h[12:16])
	if clen == 0 && ulen == 0 {
		var end [snapEndSize]byte
		if err := r.readAt(end[:], r.off, "snapshot end"); err != nil {
			return err
		}
		if got, want := binary.LittleEndian.Uint64(end[0:8]), xxh3.Hash(end[8:]); got != want {
			return errAt(r.off, "snapshot end: checksum %016x, computed %016x", got, want)
		}
		if total := binary.LittleEndian.Uint64(end[16:24]); total != r.total {
			return errAt(r.off, "snapshot end: length %d, read %d", total, r.total)
		}
		if sum := binary.LittleEndian.Uint64(end[24:32]); sum != r.hasher.Sum64() {
			return errAt(r.off, "snapshot end: payload checksum %016x, computed %016x", sum, r.hasher.Sum64())
		}
		if end := r.off + snapEndSize; end != r.size {
			return errAt(end, "snapshot: %d bytes after the end frame", r.size-end)
		}
		return io.EOF
	}
	if ulen == 0 || ulen > snapChunkMax || clen == 0 || clen > ulen {
		return errAt(r.off, "snapshot chunk: lengths %d/%d out of range", clen, ulen)
	}
	if cap(r.buf) < chunkHeader+int(clen) {
		r.buf = make([]byte, chunkHeader+int(clen))
	}
	buf := r.buf[:chunkHeader+int(clen)]
	if err := r.readAt(buf, r.off, "snapshot chunk"); err != nil {
		return err
	}
	if got, want := binary.LittleEndian.Uint64(buf[0:8]), xxh3.Hash(buf[8:]); got != want {
		return errAt(r.off, "snapshot chunk: checksum %016x, computed %016x", got, want)
	}
	data := buf[chunkHeader:]
	if clen == ulen {
		r.dec = append(r.dec[:0], data...)
	} else {
		kind := r.codec
		if kind == kindRaw {
			return errAt(r.off, "snapshot chunk: compressed in a raw snapshot")
		}
		out, err := decodeBody(r.dec, kind, data, snapChunkMax)
		if err != nil {
			return errAt(r.off, "snapshot chunk: %v", err)
		}
		if len(out) != int(ulen) {
			return errAt(r.off, "snapshot chunk: decoded %d bytes, expected %d", len(out), ulen)
		}
		r.dec = out
	}
	r.hasher.Write(r.dec)
	r.total += uint64(ulen)
	r.out = r.dec
	r.off += int64(len(buf))
	return nil
}
