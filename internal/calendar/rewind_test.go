package calendar_test

import (
	"slices"
	"testing"

	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/ring"
)

// rewindQueue is a queue under layout (16, 8, 3): at first the ring holds
// heights 0..15 (8..15 the staged epoch), the epoch tier 16..39, the tree
// the rest (40..47 the overflow stage's epoch), with the positions of its
// timers (by Val = seq) kept as an owner keeps them, and the timers it
// killed.
type rewindQueue struct {
	q      *calendar.Queue
	pos    map[uint32]ring.Pos
	killed map[uint32]bool
}

func newRewindQueue(t *testing.T) *rewindQueue {
	rq := &rewindQueue{pos: map[uint32]ring.Pos{}, killed: map[uint32]bool{}}
	q, err := calendar.New(calendar.Layout{RingSize: 16, EpochLength: 8, EpochCount: 3}, func(v uint32, p ring.Pos) { rq.pos[v] = p })
	if err != nil {
		t.Fatal(err)
	}
	q.SetResident(func(v uint32, _ uint64) bool { return !rq.killed[v] })
	rq.q = q
	return rq
}

func (rq *rewindQueue) insert(h, seq uint64) {
	rq.pos[uint32(seq)] = rq.q.Insert(ring.Entry{Height: h, Seq: seq, Val: uint32(seq)})
}

func (rq *rewindQueue) kill(h, seq uint64) {
	rq.q.Kill(h, seq, rq.pos[uint32(seq)])
	rq.killed[uint32(seq)] = true
}

// remove is kill without a tombstone in the tree, as when it is large.
func (rq *rewindQueue) remove(h, seq uint64) {
	rq.q.Remove(h, seq, rq.pos[uint32(seq)])
	rq.killed[uint32(seq)] = true
}

// built returns a setup that inserts timers of seqs 1, 2, ... at heights,
// moves to height to and kills the timers of seqs kill.
func built(heights []uint64, to uint64, kill ...uint64) func(*rewindQueue) {
	return func(rq *rewindQueue) {
		for k, h := range heights {
			rq.insert(h, uint64(k)+1)
		}
		rq.q.Advance(to)
		for _, seq := range kill {
			rq.kill(heights[seq-1], seq)
		}
	}
}

// take moves to height h and returns the seqs due there.
func (rq *rewindQueue) take(h uint64) []uint64 {
	rq.q.Advance(h)
	var seqs []uint64
	it := rq.q.Take()
	for x, ok := it.Next(rq.q.C); ok; x, ok = it.Next(rq.q.C) {
		seqs = append(seqs, x.Seq)
	}
	return seqs
}

func (rq *rewindQueue) contents() []ring.Entry {
	var es []ring.Entry
	rq.q.Walk(func(e ring.Entry, _ calendar.Tier) { es = append(es, e) })
	return es
}

// spread puts timers in every place of the layout at height 0 (the ring,
// the epoch tier, the overflow stage's epoch 5 and the tree), runs to
// height 7 (staging part of epoch 5), takes 5, then enters window 1 at 8
// (ring 8..23, epoch 2 older, staged in it, overflow stage epoch 6) and
// takes 9.
func spread(rq *rewindQueue) {
	for seq, h := range []uint64{5, 9, 12, 18, 20, 30, 44, 50, 100, 9} {
		rq.insert(h, uint64(seq)+1)
	}
	for h := uint64(1); h <= 9; h++ {
		rq.take(h)
	}
}

// TestRewind: the queue runs back in place, its timers put back in seq
// order among those of their heights, or refuses and changes nothing.
func TestRewind(t *testing.T) {
	at := func(h, seq uint64) ring.Entry { return ring.Entry{Height: h, Seq: seq, Val: uint32(seq)} }
	tests := []struct {
		name  string
		setup func(rq *rewindQueue) // ends at height 3 or later
		to    uint64
		next  uint64
		back  []ring.Entry
		ok    bool
		then  func(rq *rewindQueue) // after the rewind, before the timers are due
		tombs int                   // the tree's tombstones after the rewind
		due   map[uint64][]uint64   // after the rewind: height -> seqs due
	}{{
		name: "fired timers come back",
		setup: func(rq *rewindQueue) {
			rq.insert(4, 1)
			rq.insert(5, 2)
			rq.insert(4, 3)
			rq.insert(5, 4)
			rq.take(4)
			rq.take(5)
		},
		to: 3, next: 5, back: []ring.Entry{at(5, 4), at(4, 3), at(5, 2), at(4, 1)}, ok: true,
		due: map[uint64][]uint64{4: {1, 3}, 5: {2, 4}},
	}, {
		name:  "a cancelled timer comes back between the others",
		setup: built([]uint64{9, 9, 9, 9, 9}, 3, 2, 4),
		to:    3, next: 6, back: []ring.Entry{at(9, 4), at(9, 2)}, ok: true,
		due: map[uint64][]uint64{9: {1, 2, 3, 4, 5}},
	}, {
		name: "a window began after the target",
		setup: func(rq *rewindQueue) {
			spread(rq)
			rq.kill(30, 6) // of the epoch tier then and now
		},
		to: 4, next: 11, back: []ring.Entry{at(9, 10), at(5, 1), at(30, 6), at(9, 2)}, ok: true,
		due: map[uint64][]uint64{5: {1}, 9: {2, 10}, 12: {3}, 18: {4}, 20: {5}, 30: {6}, 44: {7}, 50: {8}, 100: {9}},
	}, {
		name: "a timer of the epoch that entered the ring in the window begun",
		setup: func(rq *rewindQueue) {
			spread(rq)
			rq.kill(18, 4)
		},
		to: 4, next: 11, back: []ring.Entry{at(18, 4), at(5, 1), at(9, 2), at(9, 10)}, ok: false,
	}, {
		name: "two windows began after the target",
		setup: func(rq *rewindQueue) {
			rq.insert(9, 1)
			rq.take(16)
		},
		to: 7, next: 2, ok: false,
	}, {
		name: "a timer due at the target or before",
		setup: func(rq *rewindQueue) {
			rq.insert(4, 1)
			rq.take(4)
		},
		to: 4, next: 2, back: []ring.Entry{at(4, 1)}, ok: false,
	}, {
		name:  "cancelled timers come back to an epoch bucket",
		setup: built([]uint64{30, 25, 30, 30}, 3, 3, 2),
		to:    3, next: 5, back: []ring.Entry{at(30, 3), at(25, 2)}, ok: true,
		due: map[uint64][]uint64{25: {2}, 30: {1, 3, 4}},
	}, {
		name: "a cancelled timer comes back to the tree",
		setup: func(rq *rewindQueue) {
			for seq := uint64(1); seq <= 3; seq++ {
				rq.insert(100, seq)
			}
			rq.q.Advance(3)
			rq.remove(100, 2)
		},
		to: 3, next: 4, back: []ring.Entry{at(100, 2)}, ok: true,
		due: map[uint64][]uint64{100: {1, 2, 3}},
	}, {
		// (20, 1), inserted when epoch 2 lay beyond the ring, is older than
		// whatever the ring takes of height 20: its place is not the ring
		// bucket.
		name:  "an older timer of the ring's range",
		setup: built([]uint64{20, 21}, 9, 1), // (21, 2) stays older
		to:    9, next: 2, back: []ring.Entry{at(20, 1)}, ok: false,
	}, {
		name: "a cancelled timer comes back to a ring bucket behind an older one",
		setup: func(rq *rewindQueue) {
			rq.insert(20, 1) // the epoch tier, then older, then staged in window 1
			rq.q.Advance(9)
			rq.insert(20, 2) // the ring
			rq.insert(20, 3)
			rq.kill(20, 3)
		},
		to: 9, next: 4, back: []ring.Entry{at(20, 3)}, ok: true,
		due: map[uint64][]uint64{20: {1, 2, 3}},
	}, {
		name:  "a timer of the overflow stage",
		setup: built([]uint64{41, 41}, 1, 1), // at 1, (41, 1) is staged: a share of 1 in 7 blocks
		to:    1, next: 3, back: []ring.Entry{at(41, 1)}, ok: false,
	}, {
		name:  "a timer whose tombstone the tree keeps",
		setup: built([]uint64{100, 100}, 3, 2),
		to:    3, next: 3, back: []ring.Entry{at(100, 2)}, ok: true,
		due: map[uint64][]uint64{100: {1, 2}},
	}, {
		name:  "a tombstone in the tree of a seq to be given again",
		setup: built([]uint64{100, 200}, 3, 2),
		// The killed timer never was: its seq is given again, to another.
		to: 3, next: 2, ok: true,
		then: func(rq *rewindQueue) {
			delete(rq.killed, 2)
			rq.insert(150, 2)
		},
		due: map[uint64][]uint64{100: {1}, 150: {2}},
	}, {
		name:  "a tombstone in the tree of an older seq",
		setup: built([]uint64{100, 200}, 3, 2),
		to:    3, next: 3, ok: true, tombs: 1,
		due: map[uint64][]uint64{100: {1}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rq := newRewindQueue(t)
			tc.setup(rq)
			h, before := rq.q.Height(), rq.contents()
			back := slices.Clone(tc.back)
			if got := rq.q.Rewind(tc.to, tc.next, back); got != tc.ok {
				t.Fatalf("Rewind(%d, %d) = %v, want %v", tc.to, tc.next, got, tc.ok)
			}
			if !tc.ok {
				if rq.q.Height() != h || !slices.Equal(rq.contents(), before) {
					t.Fatalf("a refused Rewind changed the queue: height %d -> %d, %v -> %v", h, rq.q.Height(), before, rq.contents())
				}
				return
			}
			for _, e := range tc.back {
				delete(rq.killed, e.Val)
			}
			if rq.q.Height() != tc.to {
				t.Fatalf("height %d after Rewind(%d)", rq.q.Height(), tc.to)
			}
			if got := rq.q.Tombstones(); got != tc.tombs {
				t.Errorf("%d tombstones in the tree after the rewind, want %d", got, tc.tombs)
			}
			if tc.then != nil {
				tc.then(rq)
			}
			if err := rq.q.Verify(func(v uint32) (ring.Pos, bool) { p, ok := rq.pos[v]; return p, ok }); err != nil {
				t.Fatal(err)
			}
			for h := tc.to + 1; h <= 200; h++ {
				if got := rq.take(h); !slices.Equal(got, tc.due[h]) {
					t.Errorf("due at %d: %v, want %v", h, got, tc.due[h])
				}
			}
		})
	}
}
