package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestActorTableDropHasRoom drops, for the first time, every one of many
// actors: the free list's room was made as their indices were handed out,
// so an end of block that releases the last records of thousands of actors
// does not stop to grow it (a push past the room panics). Indices are then
// reused, the last freed first, and the entries start anew.
func TestActorTableDropHasRoom(t *testing.T) {
	for _, n := range []uint32{1, 4095, 4096, 100_000} {
		tab := newActorTable()
		for i := range n {
			a := Address{0: 1, 16: byte(i >> 24), 17: byte(i >> 16), 18: byte(i >> 8), 19: byte(i)}
			require.Equal(t, i+1, tab.ref(0, &a), "index of actor %d", i)
		}
		require.GreaterOrEqual(t, tab.free.Cap(), int(n), "room in the free list")
		for i := range n {
			tab.unref(i + 1)
		}
		require.Zero(t, tab.len())
		require.Equal(t, int(n), tab.free.Len())

		a := Address{0: 2}
		require.Equal(t, n, tab.ref(0, &a), "the index freed last is taken first")
		require.Equal(t, actorRec{addr: a, refs: 1}, *tab.at(n))
		i, pending := tab.lookup(&a)
		require.Equal(t, n, i)
		require.Zero(t, pending)
	}
}

// TestActorTableLookupAfterReuse: lookup tries the index it found last
// first, which must not answer for an actor whose entry was freed (even
// the zero address, which a freed entry holds) or reused by another.
func TestActorTableLookupAfterReuse(t *testing.T) {
	for _, a := range []Address{{}, {0: 1}} {
		tab := newActorTable()
		i := tab.ref(0, &a)
		got, _ := tab.lookup(&a)
		require.Equal(t, i, got)
		tab.unref(i)
		got, _ = tab.lookup(&a)
		require.Zero(t, got, "%x after its entry was freed", a)

		b := Address{0: 9}
		require.Equal(t, i, tab.ref(0, &b), "the freed index is reused")
		got, _ = tab.lookup(&a)
		require.Zero(t, got, "%x after its entry went to %x", a, b)
		got, _ = tab.lookup(&b)
		require.Equal(t, i, got)
		tab.at(i).pending = 3
		got, pending := tab.lookup(&b)
		require.Equal(t, [2]uint32{i, 3}, [2]uint32{got, pending}, "the index found last, and its count")
	}
}
