package slab

// Stack is a stack of uint32 (free lists of indices) on a slab: it grows a
// chunk at a time, where a slice would be copied whole into a new array
// each time it grew (at a million timers, an allocation of 4 MiB whose
// clearing touched every page: a Schedule that paused for 15 ms,
// BenchmarkGrowth). The zero Stack is empty and has no room.
type Stack struct {
	s Slab[uint32]
	n uint32
}

// Reserve makes room for n values: Push allocates nothing while the stack
// holds fewer.
func (f *Stack) Reserve(n int) {
	if n > 0 {
		f.s.Ensure(uint32(n - 1))
	}
}

// Grow is Reserve with the memory of the room it adds mapped now (Slab.Grow).
func (f *Stack) Grow(n int) { f.s.Grow(n) }

// Clear empties the stack, keeping its room.
func (f *Stack) Clear() { f.n = 0 }

// Bytes is the memory the stack holds.
func (f *Stack) Bytes() int { return f.s.Bytes() }

// Cap is the number of values the stack has room for.
func (f *Stack) Cap() int { return f.s.Cap() }

// Len is the number of values on the stack.
func (f *Stack) Len() int { return int(f.n) }

// Push adds v, in room that Reserve made.
func (f *Stack) Push(v uint32) {
	*f.s.At(f.n) = v
	f.n++
}

// Top is the value Pop would return.
func (f *Stack) Top() (uint32, bool) {
	if f.n == 0 {
		return 0, false
	}
	return *f.s.At(f.n - 1), true
}

// Below is the value d places below the top (Below(0) is Top): the one
// the d+1-th Pop from now returns, if nothing is pushed before.
func (f *Stack) Below(d uint32) (uint32, bool) {
	if d >= f.n {
		return 0, false
	}
	return *f.s.At(f.n - 1 - d), true
}

// Pop removes and returns the value pushed last.
func (f *Stack) Pop() (uint32, bool) {
	v, ok := f.Top()
	if ok {
		f.n--
	}
	return v, ok
}
