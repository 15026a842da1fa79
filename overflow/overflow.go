// Package overflow is tier 3 of the calendar queue: the far-future timers,
// in a B-tree (github.com/tidwall/btree) of entries ordered by (height,
// sequence).
//
// Epoch maintenance pops the timers that come within the epoch tier's range
// in that order, which per height is insertion order.
package overflow

import (
	"github.com/tidwall/btree"

	"github.com/timerlane/timerlane/ring"
)

func less(a, b ring.Entry) bool {
	if a.Height != b.Height {
		return a.Height < b.Height
	}
	return a.Seq < b.Seq
}

// Tree is the overflow tier.
type Tree struct {
	t *btree.BTreeG[ring.Entry]
	// The path of the last insert: inserts in ascending order, as a
	// restore makes them, then search little.
	hint btree.PathHint
}

// New returns an empty tree.
func New() *Tree {
	return &Tree{t: btree.NewBTreeGOptions(less, btree.Options{NoLocks: true, Degree: 64})}
}

// Insert adds e; (Height, Seq) must be unique.
func (t *Tree) Insert(e ring.Entry) { t.t.SetHint(e, &t.hint) }

// Load adds e, like Insert; when e comes after every entry, as in a bulk
// load in (height, seq) order, it appends without a search.
func (t *Tree) Load(e ring.Entry) { t.t.Load(e) }

// Delete removes the entry with (height, seq) and reports whether it was there.
func (t *Tree) Delete(height, seq uint64) bool {
	_, ok := t.t.Delete(ring.Entry{Height: height, Seq: seq})
	return ok
}

// Min returns the first entry in (height, seq) order.
func (t *Tree) Min() (ring.Entry, bool) { return t.t.Min() }

// PopMin removes and returns the first entry.
func (t *Tree) PopMin() (ring.Entry, bool) { return t.t.PopMin() }

// Len is the number of entries.
func (t *Tree) Len() int { return t.t.Len() }

// Ascend calls f for every entry in (height, seq) order until f returns false.
func (t *Tree) Ascend(f func(ring.Entry) bool) { t.t.Scan(f) }
