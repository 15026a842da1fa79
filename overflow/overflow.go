// Package overflow is tier 3 of the calendar queue: the far-future timers,
// in a B-tree (github.com/tidwall/btree) ordered by (height, sequence).
//
// Epoch maintenance pops the timers that come within the epoch tier's range
// in that order, which per height is insertion order.
package overflow

import "github.com/tidwall/btree"

// Item is one far-future timer: its height, its insertion sequence and the
// arena node that holds it.
type Item struct {
	Height uint64
	Seq    uint64
	Node   uint32
}

func less(a, b Item) bool {
	if a.Height != b.Height {
		return a.Height < b.Height
	}
	return a.Seq < b.Seq
}

// Tree is the overflow tier.
type Tree struct {
	t *btree.BTreeG[Item]
}

// New returns an empty tree.
func New() *Tree {
	return &Tree{t: btree.NewBTreeGOptions(less, btree.Options{NoLocks: true, Degree: 64})}
}

// Insert adds it; (Height, Seq) must be unique.
func (t *Tree) Insert(it Item) { t.t.Set(it) }

// Delete removes the item with it's (Height, Seq) and reports whether it was there.
func (t *Tree) Delete(it Item) bool {
	_, ok := t.t.Delete(it)
	return ok
}

// Min returns the first item in (height, seq) order.
func (t *Tree) Min() (Item, bool) { return t.t.Min() }

// PopBelow removes and returns the first item if its height is < h.
func (t *Tree) PopBelow(h uint64) (Item, bool) {
	it, ok := t.t.Min()
	if !ok || it.Height >= h {
		return Item{}, false
	}
	t.t.PopMin()
	return it, true
}

// Len is the number of items.
func (t *Tree) Len() int { return t.t.Len() }

// Ascend calls f for every item in (height, seq) order until f returns false.
func (t *Tree) Ascend(f func(Item) bool) { t.t.Scan(f) }
