package engine

import "github.com/timerlane/timerlane/internal/slab"

// actorTable is the per-actor secondary index of CIP-5 §8: for each actor
// with a timer record, how many of its timers are pending (the cap counts
// these) and how many records refer to it (pending, cancelled inside an open
// transaction, or firing). An actor is dropped when no record refers to it,
// so memory follows the actors that have timers, not every actor ever seen.
//
// The entries and the free indices are slabs: a slice grown by append
// copies itself whole when it doubles, and a million actors' entries
// (28 MiB) would pause the Schedule or end of block that made it grow.
type actorTable struct {
	byAddr map[Address]uint32
	recs   slab.Slab[actorRec] // index 0 unused
	n      uint32              // indices handed out, 0 included
	free   slab.Stack          // with room for every index handed out
	last   uint32              // the index lookup found last, 0 for none
}

type actorRec struct {
	addr    Address
	pending uint32
	refs    uint32
}

func newActorTable() actorTable {
	t := actorTable{byAddr: make(map[Address]uint32), n: 1}
	t.recs.Ensure(0)
	return t
}

// at is entry i, i < n.
func (t *actorTable) at(i uint32) *actorRec { return t.recs.At(i) }

// lookup returns a's index (0 if it has no entry) and its pending count.
// Timers come in runs of one actor's (a transaction's schedules, in
// sequence order in a log record and a snapshot), so the index found last
// is tried before the map. A freed entry has no refs, and an entry
// reused holds its new address: neither passes for a.
func (t *actorTable) lookup(a *Address) (uint32, uint32) {
	if r := t.recs.At(t.last); r.refs > 0 && r.addr == *a {
		return t.last, r.pending
	}
	i := t.byAddr[*a]
	t.last = i
	return i, t.recs.At(i).pending
}

// ref returns a's index, creating its entry (i = 0), and counts one more
// record.
func (t *actorTable) ref(i uint32, a *Address) uint32 {
	if i == 0 {
		i = t.add(a)
	}
	t.recs.At(i).refs++
	return i
}

// add makes an entry for a, with no record yet, and returns its index.
func (t *actorTable) add(a *Address) uint32 {
	i, ok := t.free.Pop()
	if !ok {
		i = t.n
		t.n++
		t.recs.Ensure(i)
		t.free.Grow(int(t.n))
	}
	*t.recs.At(i) = actorRec{addr: *a}
	t.byAddr[*a] = i
	return i
}

// unref counts one record less and drops the actor when none is left.
func (t *actorTable) unref(i uint32) {
	r := t.recs.At(i)
	r.refs--
	if r.refs == 0 {
		delete(t.byAddr, r.addr)
		*r = actorRec{}
		t.free.Push(i)
	}
}

func (t *actorTable) len() int { return len(t.byAddr) }
