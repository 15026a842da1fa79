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

// snapWriter writes the snapshot file format for the state at a height to
// w: the header when it is made, the payload in chunks as it is written,
// the end frame at Close. The first error of w sticks: every later call
// returns it, and err tells it apart from a failure of whoever writes the
// payload.
type snapWriter struct {
	w      io.Writer
	c      Compression
	zenc   *zstd.Encoder
	chunk  []byte // payload not yet framed; its capacity is the chunk size
	frame  []byte
	hasher *xxh3.Hasher
	total  uint64
	err    error
}

func newSnapWriter(w io.Writer, height uint64, c Compression, zenc *zstd.Encoder, chunkSize int) *snapWriter {
	s := &snapWriter{w: w, c: c, zenc: zenc, chunk: make([]byte, 0, chunkSize), hasher: xxh3.New()}
	hdr := make([]byte, 0, snapHeaderSize)
	hdr = append(hdr, snapMagic...)
	hdr = binary.LittleEndian.AppendUint64(hdr, height)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(c.kind()))
	hdr = binary.LittleEndian.AppendUint64(hdr, xxh3.Hash(hdr))
	s.write(hdr)
	return s
}

func (s *snapWriter) write(b []byte) {
	if s.err == nil {
		_, s.err = s.w.Write(b)
	}
}

// Write adds p to the payload.
func (s *snapWriter) Write(p []byte) (int, error) {
	n := 0
	for s.err == nil && n < len(p) {
		if len(s.chunk) == 0 && len(p)-n >= cap(s.chunk) {
			// A whole chunk: framed from p, not copied first (StartSnapshot
			// hands over whole chunks).
			s.frameChunk(p[n : n+cap(s.chunk)])
			n += cap(s.chunk)
			continue
		}
		k := copy(s.chunk[len(s.chunk):cap(s.chunk)], p[n:])
		s.chunk = s.chunk[:len(s.chunk)+k]
		n += k
		if len(s.chunk) == cap(s.chunk) {
			s.flush()
		}
	}
	return n, s.err
}

// flush writes the buffered payload as a chunk.
func (s *snapWriter) flush() {
	if len(s.chunk) == 0 {
		return
	}
	s.frameChunk(s.chunk)
	s.chunk = s.chunk[:0]
}

// frameChunk writes c as a chunk.
func (s *snapWriter) frameChunk(c []byte) {
	s.hasher.Write(c)
	s.total += uint64(len(c))
	s.frame = appendChunk(s.frame[:0], c, s.c, s.zenc)
	s.write(s.frame)
}

// Close writes the last chunk and the end frame (it does not close w).
func (s *snapWriter) Close() error {
	s.flush()
	end := make([]byte, snapEndSize)
	binary.LittleEndian.PutUint64(end[16:24], s.total)
	binary.LittleEndian.PutUint64(end[24:32], s.hasher.Sum64())
	binary.LittleEndian.PutUint64(end[0:8], xxh3.Hash(end[8:]))
	s.write(end)
	return s.err
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
