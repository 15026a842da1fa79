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
	// The path of the last insert and its height: inserts in ascending
	// order search little from there (see hintReach).
	hint       btree.PathHint
	lastHeight uint64
}

// hintReach bounds how far above the last insert's height an insert takes
// the path hint. Far timers set with one delay arrive in ascending runs,
// where the hint spares most of the search (BenchmarkInsert, patterns runs
// and ascending: 226-273 ns with it, 329-341 without); far timers set at
// random land anywhere, and there a wrong hint costs one more comparison,
// on a line that is likely not loaded, at every level (pattern random,
// medians of 5 alternating runs: 882 ns with the hint always taken, 830
// with this bound).
const hintReach = 1 << 16

// New returns an empty tree. Degree 32 (leaves of at most 63 entries):
// epoch maintenance pops the tree's first entry, and a pop shifts the rest
// of its leaf, so that at degree 64 a million far timers crossing into the
// epoch tier spent most of their 0.31-0.36 ms a block shifting; at 32,
// 0.24-0.25 ms, with inserts, cancels, rollbacks and memory no worse
// (session 18's alternating runs, docs/BENCHMARK_HISTORY.md).
func New() *Tree {
	return &Tree{t: btree.NewBTreeGOptions(less, btree.Options{NoLocks: true, Degree: 32})}
}

// Insert adds e and reports whether it replaced an entry of the same
// (Height, Seq), which callers keep unique.
func (t *Tree) Insert(e ring.Entry) (replaced bool) {
	if e.Height-t.lastHeight < hintReach { // at or just above the last insert
		_, replaced = t.t.SetHint(e, &t.hint)
	} else {
		_, replaced = t.t.Set(e)
	}
	t.lastHeight = e.Height
	return replaced
}

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

// CountTo is the number of entries of height h or below: a binary search
// over their ranks, O(log^2 n), since the tree keeps the size of every
// subtree (GetAt), where counting them one by one took O(n).
func (t *Tree) CountTo(h uint64) int {
	lo, hi := 0, t.t.Len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x, _ := t.t.GetAt(m); x.Height <= h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Len is the number of entries.
func (t *Tree) Len() int { return t.t.Len() }

// Purge removes every entry whose (Height, Seq) is in dead, which is in
// (height, seq) order and may name entries the tree does not hold, and
// calls removed for each entry it removes. It builds the tree anew from
// the entries it keeps, appended in order: one pass over the tree and
// dead, where deleting the entries one by one would search the tree for
// each, which costs more per entry as soon as a good share of it goes.
func (t *Tree) Purge(dead []ring.Entry, removed func(ring.Entry)) {
	kept := New()
	j := 0
	t.t.Scan(func(x ring.Entry) bool {
		for j < len(dead) && less(dead[j], x) {
			j++
		}
		if j < len(dead) && dead[j].Height == x.Height && dead[j].Seq == x.Seq {
			j++
			removed(x)
			return true
		}
		kept.t.Load(x)
		return true
	})
	*t = *kept
}

// Ascend calls f for every entry in (height, seq) order until f returns false.
func (t *Tree) Ascend(f func(ring.Entry) bool) { t.t.Scan(f) }
