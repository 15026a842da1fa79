package calendar

import "github.com/timerlane/timerlane/ring"

// StageLens reports, for tests, the timers of the staged epoch w+1 in the
// stage and those still in its source, and the timers in the overflow
// stage and those of its epoch still in the tree.
func (q *Queue) StageLens() (staged, unstaged, ostaged, ounstaged int) {
	if q.staging() {
		b, i := q.src()
		unstaged = int(b.At(i).Live)
	}
	return q.stage.Len(), unstaged, q.ostage.Len(), q.ostLeft
}

// Walked is the number of entries NextAfter has read to find the lowest
// height of a bucket of the epoch tier, the older buckets or the overflow
// stage.
func (q *Queue) Walked() uint64 { return q.epochs.Walked() + q.older.Walked() + q.ostage.Walked() }

// TreeState reports, for tests, the tombstones in the tree, the keys Kill
// has noted for the next purge, and the entries the tree holds in all.
func (q *Queue) TreeState() (dead, named, inTree int) {
	return q.dead, len(q.deadKeys), q.overflow.Len()
}

// InOrder is inOrder, for tests.
var InOrder = inOrder

// SortKeys sorts es as a purge does and reports whether it packed them.
func SortKeys(es []ring.Entry) (packed bool) {
	var k keySorter
	packed = k.sortPacked(es)
	if !packed {
		k.sort(es)
	}
	return packed
}
