package ring

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/timerlane/timerlane/internal/permtest"
)

// model drives bucket 0 of a Buckets through the owner's calls, Push,
// Kill and Shift, beside the list of its live seqs in order, and keeps
// every entry's position as moved reports it.
type model struct {
	t     *testing.T
	c     *Chunks
	s     Buckets
	pos   map[uint64]Pos
	want  []uint64 // live seqs, in order
	next  uint64
	moves int // positions reported by the last Kill
	peak  int // the most moves one Kill made
	worst int // the most chunks in use beyond chunkBound
}

func newModel(t *testing.T) *model {
	return &model{t: t, c: NewChunks(), s: NewBuckets(1), pos: map[uint64]Pos{}, next: 1}
}

func (m *model) push() {
	m.pos[m.next] = m.s.Push(m.c, 0, Entry{Height: 5, Seq: m.next, Val: uint32(m.next)})
	m.want = append(m.want, m.next)
	m.next++
}

func (m *model) kill(seq uint64) {
	m.moves = 0
	m.s.Kill(m.c, 0, m.pos[seq], func(e Entry, p Pos) {
		if _, ok := m.pos[e.Seq]; !ok || e.Seq == seq || uint64(e.Val) != e.Seq || e.Height != 5 {
			m.t.Fatalf("moved reports %+v, not a live entry", e)
		}
		m.pos[e.Seq] = p
		m.moves++
	})
	delete(m.pos, seq)
	m.want = slices.Delete(m.want, slices.Index(m.want, seq), slices.Index(m.want, seq)+1)
	m.peak = max(m.peak, m.moves)
	m.bound()
}

func (m *model) shift() {
	e, ok := m.s.Shift(m.c, 0)
	if !ok || e.Seq != m.want[0] {
		m.t.Fatalf("Shift = %+v, %v; want seq %d", e, ok, m.want[0])
	}
	delete(m.pos, e.Seq)
	m.want = m.want[1:]
	m.bound()
}

// chunkBound is the most chunks a bucket of live entries may use: a
// compaction starts at fewer than 2*live+ChunkLen+2 slots and ends before
// Kills have taken much more than a quarter of the live entries (see
// CompactStep), so slots stay below 3*live + ChunkLen; the partly used
// chunks at the head, the write cursor and the tail add three.
func chunkBound(live int) int { return (3*live+ChunkLen)/ChunkLen + 3 }

func (m *model) bound() {
	if d := m.c.Live() - chunkBound(len(m.want)); d > m.worst {
		m.worst = d
	}
}

// check compares the bucket with the model: order, positions and counts.
func (m *model) check(what string) {
	m.t.Helper()
	var got []uint64
	b := m.s.At(0)
	b.WalkPos(m.c, func(e Entry, p Pos) {
		if m.pos[e.Seq] != p || !holds(m.c, p, e) {
			m.t.Fatalf("%s: seq %d at %d, reported at %d", what, e.Seq, p, m.pos[e.Seq])
		}
		got = append(got, e.Seq)
	})
	if !slices.Equal(got, m.want) || int(b.Live) != len(m.want) || m.s.Len() != len(m.want) {
		m.t.Fatalf("%s: walk %d entries (Live %d), want %d", what, len(got), b.Live, len(m.want))
	}
	dead := 0
	if b.tail != nilChunk {
		// Every slot written from the head on is live or counted dead.
		slots := 0
		for i, from := b.head, int(b.headOff); ; i, from = *m.c.next.At(i), 0 {
			n := ChunkLen
			if i == b.tail {
				n = int(b.tailLen)
			}
			slots += n - from
			if i == b.tail {
				break
			}
		}
		dead = slots - len(m.want)
	}
	if int(b.Dead) != dead {
		m.t.Fatalf("%s: Dead %d, the bucket holds %d tombstones", what, b.Dead, dead)
	}
}

// TestCompactionIsIncremental: n entries in one bucket, each cancelled in
// turn, in insertion order, reverse, at random, every other one first:
// no Kill moves more than CompactWhole entries (a compaction in one go
// moved half of them: 1,483 of 3,000), the chunks in use stay within a constant factor of
// the live entries, and the bucket is right after every Kill. With
// shifts from the front (an epoch bucket being staged) between the
// kills, and pushes to its tail, the same.
func TestCompactionIsIncremental(t *testing.T) {
	const n = 3000
	for _, o := range permtest.Orders {
		for _, staged := range []bool{false, true} {
			name := o.Name
			if staged {
				name += ", staged"
			}
			t.Run(name, func(t *testing.T) {
				m := newModel(t)
				for range n {
					m.push()
				}
				seqs := slices.Clone(m.want)
				for k, i := range o.Perm(n) {
					if _, ok := m.pos[seqs[i]]; !ok {
						continue // shifted out
					}
					m.kill(seqs[i])
					if staged && k%5 == 0 && len(m.want) > 0 {
						m.shift()
						if k%3 == 0 {
							m.push()
						}
					}
					if k%17 == 0 || m.s.At(0).Compacting() && k%3 == 0 {
						m.check(name)
					}
				}
				for len(m.want) > 0 {
					m.shift()
				}
				if m.peak > CompactWhole || m.worst > 0 {
					t.Fatalf("a Kill moved up to %d entries (bound %d); chunks in use exceeded the bound by %d", m.peak, CompactWhole, m.worst)
				}
				if m.c.Live() != 0 || *m.s.At(0) != (Bucket{}) {
					t.Fatalf("emptied: %d chunks live, bucket %+v", m.c.Live(), *m.s.At(0))
				}
			})
		}
	}
}

// TestCompactionBoundsChurn: a schedule and a cancel at one height, over
// and over (a far height, whose bucket no block drains): memory stays
// within a constant factor of the live entries, whichever entries the
// cancels take, and no Kill moves more than CompactWhole.
func TestCompactionBoundsChurn(t *testing.T) {
	for _, tc := range []struct {
		name string
		pick func(m *model, rng *rand.Rand) uint64
	}{
		{"oldest", func(m *model, _ *rand.Rand) uint64 { return m.want[0] }},
		{"random", func(m *model, rng *rand.Rand) uint64 { return m.want[rng.IntN(len(m.want))] }},
		{"second newest", func(m *model, _ *rand.Rand) uint64 { return m.want[len(m.want)-2] }},
		{"near the front", func(m *model, rng *rand.Rand) uint64 { return m.want[rng.IntN(min(len(m.want), 40))] }},
	} {
		for _, live := range []int{1, 2, 33, 500} {
			t.Run(fmt.Sprintf("%s, %d live", tc.name, live), func(t *testing.T) {
				m := newModel(t)
				rng := rand.New(rand.NewPCG(uint64(live), 2))
				for range live + 1 {
					m.push()
				}
				for k := range 40_000 {
					m.kill(tc.pick(m, rng))
					m.push()
					if k%997 == 0 {
						m.check(tc.name)
					}
				}
				m.check(tc.name)
				if m.peak > CompactWhole || m.worst > 0 {
					t.Fatalf("live %d: a Kill moved up to %d entries (bound %d); chunks in use exceeded the bound by %d", live, m.peak, CompactWhole, m.worst)
				}
			})
		}
	}
}

// TestCompactionHandsOver: a bucket taken whole, moved to another or
// emptied while a compaction runs yields its entries in order and gives
// back every chunk; a bucket moved on keeps compacting where it is.
func TestCompactionHandsOver(t *testing.T) {
	setup := func(t *testing.T) *model {
		m := newModel(t)
		for range 20 * ChunkLen {
			m.push()
		}
		seqs := slices.Clone(m.want)
		for _, s := range seqs[:11*ChunkLen] {
			m.kill(s)
			if m.s.At(0).Compacting() {
				break
			}
		}
		m.kill(seqs[len(seqs)-1]) // not taken back while compacting
		if !m.s.At(0).Compacting() {
			t.Fatal("no compaction runs")
		}
		m.check("compacting")
		return m
	}
	t.Run("Take", func(t *testing.T) {
		m := setup(t)
		if got := seqs(m.c, m.s.Take(0)); !slices.Equal(got, m.want) || m.c.Live() != 0 {
			t.Fatalf("took %d entries, want %d; %d chunks live", len(got), len(m.want), m.c.Live())
		}
	})
	t.Run("MoveTo", func(t *testing.T) {
		m := setup(t)
		d := NewBuckets(2)
		m.s.MoveTo(0, &d, 1)
		d.MoveTo(1, &m.s, 0) // back to 0, where the model looks
		for len(m.want) > 1 {
			m.kill(m.want[len(m.want)/2])
			m.check("moved")
		}
		m.kill(m.want[0])
		if m.c.Live() != 0 || m.peak > CompactWhole {
			t.Fatalf("%d chunks live, %d moves", m.c.Live(), m.peak)
		}
	})
	t.Run("Shift", func(t *testing.T) {
		m := setup(t)
		for len(m.want) > 0 {
			m.shift()
			m.check("shifted")
		}
		if m.c.Live() != 0 {
			t.Fatalf("%d chunks live", m.c.Live())
		}
	})
	t.Run("Shift to the write cursor", func(t *testing.T) {
		// 512 entries, more than CompactWhole: seqs 3..275 die, the
		// 273rd kill starts a compaction in steps, which reads 1 and 2
		// (which stay) and tombstones; then 2 dies, behind the write
		// cursor. Shift returns 1 and reads on to the cursor.
		m := newModel(t)
		for range 16 * ChunkLen {
			m.push()
		}
		for s := uint64(3); s <= 275; s++ {
			m.kill(s)
		}
		b := m.s.At(0)
		if !b.Compacting() || b.cw != b.head || b.cwOff != 2 {
			t.Fatalf("compaction writes at %d:%d, head %d", b.cw, b.cwOff, b.head)
		}
		m.kill(2)
		m.shift()
		m.check("at the write cursor")
		m.shift()
		if b.Compacting() {
			t.Fatal("Shift past the write cursor: the compaction still runs")
		}
		m.check("past the write cursor")
		for len(m.want) > 0 {
			m.shift()
		}
		if m.c.Live() != 0 {
			t.Fatalf("%d chunks live", m.c.Live())
		}
	})
	t.Run("Push", func(t *testing.T) {
		m := setup(t)
		for m.s.At(0).Compacting() {
			m.push()
			m.kill(m.want[len(m.want)-2])
			m.check("pushed")
		}
	})
}

// TestCompactionWholeEnds: a compaction that starts with at most
// CompactWhole slots ends in the Kill that starts it, however the slots
// lie across chunks (the chunks it frees on the way took steps, and one
// of 253 slots over 9 chunks went on in steps of 8).
func TestCompactionWholeEnds(t *testing.T) {
	for total := 200; total <= 300; total++ {
		for _, shifted := range []int{0, 1, 5, 31, 32, 33} {
			m := newModel(t)
			for range total + shifted {
				m.push()
			}
			for range shifted {
				m.shift()
			}
			b := m.s.At(0)
			for !b.Compacting() && len(m.want) > 1 {
				slots := b.Live + b.Dead
				starts := b.Dead+1 > b.Live-1+ChunkLen
				m.kill(m.want[0])
				if starts {
					if slots <= CompactWhole && b.Compacting() {
						t.Fatalf("%d entries, %d shifted: a compaction of %d slots still runs after the Kill that started it", total, shifted, slots)
					}
					break
				}
			}
			m.check("after the compaction started")
		}
	}
}

// TestShiftToRandom runs random pushes, kills (with the compactions they
// start) and shifts of random batches on one bucket of the Buckets, against
// a slice of its live entries in order: every batch is the front of the
// slice, every entry left keeps its position, and the counts and the
// occupied set agree.
func TestShiftToRandom(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 11))
		c := NewChunks()
		s := NewBuckets(4)
		const i = 2
		pos := map[uint64]Pos{}
		var want []Entry
		next := uint64(1)
		buf := make([]Entry, 3*ChunkLen)
		moved := func(e Entry, p Pos) { pos[e.Seq] = p }
		for op := range 6000 {
			// Phases of 1000 ops: growth past CompactWhole slots, then
			// kills (which start compactions that run a few entries a
			// kill) with shifts among them.
			pushes, kills := 37, 39 // of 40; shifts the rest
			if op/1000%2 == 1 {
				pushes, kills = 2, 38
			}
			switch k := r.IntN(40); {
			case k < pushes:
				e := Entry{Height: 1000 + r.Uint64N(50), Seq: next, Val: uint32(next)}
				next++
				pos[e.Seq] = s.Push(c, i, e)
				want = append(want, e)
			case k < kills && len(want) > 0:
				j := r.IntN(len(want))
				s.Kill(c, i, pos[want[j].Seq], moved)
				delete(pos, want[j].Seq)
				want = slices.Delete(want, j, j+1)
			default:
				n := 1 + r.IntN(4) // mostly a few, as staging shifts
				if r.IntN(4) == 0 {
					n = 1 + r.IntN(len(buf))
				}
				got := s.ShiftTo(c, i, buf[:n])
				if got != min(n, len(want)) || !slices.Equal(buf[:got], want[:got]) {
					t.Fatalf("seed %d op %d: ShiftTo of %d gave %v, want %v", seed, op, n, buf[:got], want[:min(n, len(want))])
				}
				for _, e := range want[:got] {
					delete(pos, e.Seq)
				}
				want = want[got:]
			}
			var walked []Entry
			s.At(i).WalkPos(c, func(e Entry, p Pos) {
				if p != pos[e.Seq] {
					t.Fatalf("seed %d op %d: seq %d at %d, told %d", seed, op, e.Seq, p, pos[e.Seq])
				}
				walked = append(walked, e)
			})
			if !slices.Equal(walked, want) || s.Len() != len(want) {
				t.Fatalf("seed %d op %d: bucket holds %v (Len %d), want %v", seed, op, walked, s.Len(), want)
			}
			if _, ok := s.Next(i, 1); ok != (len(want) > 0) {
				t.Fatalf("seed %d op %d: occupied %v with %d live", seed, op, ok, len(want))
			}
		}
		s.At(i).Release(c)
		if c.Live() != 0 {
			t.Fatalf("seed %d: %d chunks live after the release", seed, c.Live())
		}
	}
}
