// Package scratch holds Buf, a byte buffer reused from one use to the
// next, as the log's record buffers are, that gives back the room a rare
// large use left in it. A block of many large payloads grows the buffers
// that encode its record to about its size each; kept, that room would
// stay for the life of the process, whatever the blocks after it.
package scratch

// keepBytes is the room a Buf keeps whatever its uses.
const keepBytes = 1 << 20

// Buf is a reusable buffer. The zero Buf is empty.
type Buf struct {
	b    []byte
	high int // the recent uses' high-water mark, falling by 1/64 a use
}

// Take returns the buffer, empty, to append to.
func (s *Buf) Take() []byte { return s.b[:0] }

// Last is the bytes of the last use, or nil if Keep gave its room back.
func (s *Buf) Last() []byte { return s.b }

// Keep takes back b, what Take returned with a use's bytes appended. It
// keeps b's room for the next use unless that room is over keepBytes and
// four times the recent uses' high-water mark: past a use far larger than
// the others, within about 90 uses of a quarter of its size or less.
// (Four, not two: append grows a buffer by up to twice its need.)
func (s *Buf) Keep(b []byte) {
	s.high = max(len(b), s.high-s.high/64)
	if cap(b) > keepBytes && cap(b) > 4*s.high {
		b = nil
	}
	s.b = b
}
