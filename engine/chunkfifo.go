package engine

import "iter"

// chunkFIFO is fifoBuf for the history's two long lists (the undo entries
// and the taken timers, one of each per operation and per fire of the
// last RollbackDepth blocks): the same absolute positions, held in chunks
// of chunkItems that never move. It grows a chunk at a time, taking back
// the chunks its front has trimmed, where a slice grown by append copies
// itself into a new array of megabytes, whose first touch paused the end
// of block that grew it for milliseconds (the demo's load: 1.5 to 3.2 MB
// in one block, 2.5 to 11 ms). The zero chunkFIFO is empty.
type chunkFIFO[T any] struct {
	chunks [][]T  // chunks[0] holds positions base .. base+chunkItems-1
	spare  [][]T  // chunks trimmed or cut, for reuse
	base   uint64 // the first position of chunks[0]
	head   uint64 // the first live position
	n      uint64 // one past the last position
}

const (
	chunkShift = 12
	chunkItems = 1 << chunkShift
)

func (f *chunkFIFO[T]) end() uint64 { return f.n }
func (f *chunkFIFO[T]) full() bool  { return f.n-f.base == uint64(len(f.chunks))<<chunkShift }
func (f *chunkFIFO[T]) push1(v T)   { f.room(); *f.pos(f.n) = v; f.n++ }

// pos is the item at absolute position a, which is live.
func (f *chunkFIFO[T]) pos(a uint64) *T {
	o := a - f.base
	return &f.chunks[o>>chunkShift][o&(chunkItems-1)]
}

// room makes sure the last chunk has room for one more item.
func (f *chunkFIFO[T]) room() {
	if !f.full() {
		return
	}
	var c []T
	if k := len(f.spare); k > 0 {
		c, f.spare = f.spare[k-1], f.spare[:k-1]
	} else {
		c = make([]T, chunkItems)
	}
	f.chunks = append(f.chunks, c)
}

// extend appends up to n items, as many as the last chunk has room for
// (at least one), and returns them for the caller to set, every one: a
// chunk taken back holds what it held before.
func (f *chunkFIFO[T]) extend(n int) []T {
	f.room()
	c := f.seg(f.n, f.n+uint64(n))
	f.n += uint64(len(c))
	return c
}

// push appends vs.
func (f *chunkFIFO[T]) push(vs ...T) {
	for len(vs) > 0 {
		vs = vs[copy(f.extend(len(vs)), vs):]
	}
}

// seg returns the items from position a on, up to b or the end of a's
// chunk, whichever comes first: for a := from; a < to; a += len(seg)
// walks from..to in slices.
func (f *chunkFIFO[T]) seg(a, b uint64) []T {
	o := a - f.base
	lo := o & (chunkItems - 1)
	return f.chunks[o>>chunkShift][lo : lo+min(b-a, chunkItems-lo)]
}

// segs is the items from position a up to b, a slice (seg) at a time.
func (f *chunkFIFO[T]) segs(a, b uint64) iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		for a < b {
			s := f.seg(a, b)
			if !yield(s) {
				return
			}
			a += uint64(len(s))
		}
	}
}

// cut drops the items from position a on.
func (f *chunkFIFO[T]) cut(a uint64) {
	f.n = a
	keep := int((a - f.base + chunkItems - 1) >> chunkShift)
	for len(f.chunks) > keep {
		k := len(f.chunks) - 1
		f.spare = append(f.spare, f.chunks[k])
		f.chunks = f.chunks[:k]
	}
}

// trim drops the items before position a. Whole chunks go to spare; the
// chunk list is moved down rather than resliced, so that it never needs a
// new array while its length stays the same.
func (f *chunkFIFO[T]) trim(a uint64) {
	f.head = a
	for a-f.base >= chunkItems {
		f.spare = append(f.spare, f.chunks[0])
		copy(f.chunks, f.chunks[1:])
		f.chunks = f.chunks[:len(f.chunks)-1]
		f.base += chunkItems
	}
}
