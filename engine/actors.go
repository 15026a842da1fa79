package engine

// actorTable is the per-actor secondary index of CIP-5 §8: for each actor
// with a timer record, how many of its timers are pending (the cap counts
// these) and how many records refer to it (pending, cancelled inside an open
// transaction, or firing). An actor is dropped when no record refers to it,
// so memory follows the actors that have timers, not every actor ever seen.
type actorTable struct {
	byAddr map[Address]uint32
	recs   []actorRec // index 0 unused
	free   []uint32
}

type actorRec struct {
	addr    Address
	pending uint32
	refs    uint32
}

func newActorTable() actorTable {
	return actorTable{byAddr: make(map[Address]uint32), recs: make([]actorRec, 1)}
}

// lookup returns a's index (0 if it has no entry) and its pending count.
func (t *actorTable) lookup(a *Address) (uint32, uint32) {
	i := t.byAddr[*a]
	return i, t.recs[i].pending
}

// ref returns a's index, creating its entry, and counts one more record.
func (t *actorTable) ref(i uint32, a *Address) uint32 {
	if i == 0 {
		if k := len(t.free); k > 0 {
			i = t.free[k-1]
			t.free = t.free[:k-1]
		} else {
			i = uint32(len(t.recs))
			t.recs = append(t.recs, actorRec{})
		}
		t.recs[i] = actorRec{addr: *a}
		t.byAddr[*a] = i
	}
	t.recs[i].refs++
	return i
}

// unref counts one record less and drops the actor when none is left.
func (t *actorTable) unref(i uint32) {
	r := &t.recs[i]
	r.refs--
	if r.refs == 0 {
		delete(t.byAddr, r.addr)
		*r = actorRec{}
		t.free = append(t.free, i)
	}
}

func (t *actorTable) len() int { return len(t.byAddr) }
