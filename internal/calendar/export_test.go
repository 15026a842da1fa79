package calendar

import "github.com/timerlane/timerlane/ring"

// StageLens reports, for tests, the timers in staging and those of the
// staged epoch still in its epoch bucket, and the timers in the overflow
// stage and those of its epoch still in the tree.
func (q *Queue) StageLens() (staged, unstaged, ostaged, ounstaged int) {
	if q.staging() {
		unstaged = int(q.epochs.At(q.stageSrc).Live)
	}
	return q.stage.Len(), unstaged, q.ostage.Len(), q.ostLeft
}

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

// Walked is the number of entries NextAfter has read to find the lowest
// height of a bucket of the epoch tier or the overflow stage.
func (q *Queue) Walked() uint64 { return q.epochs.Walked() + q.ostage.Walked() }
