package bench

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/internal/calendar"
)

// noop is the Executor of the engine benchmarks: delivery cost only.
type noop struct{}

func (noop) Execute(engine.Tx, *engine.Delivery) (engine.Usage, error) {
	return engine.Usage{}, nil
}

var nop engine.Executor = noop{}

const (
	perTx    = 64   // calls per transaction, one actor each
	perBlock = 1024 // schedules per block in the steady state
	nActors  = 4096 // actors in turn; keeps each under max_timers_per_actor
)

var actors = func() []engine.Address {
	a := make([]engine.Address, nActors)
	for i := range a {
		a[i][0] = 0xac
		binary.BigEndian.PutUint32(a[i][16:], uint32(i))
	}
	return a
}()

// benchRollbackDepth keeps rollback on in the engine benchmarks, but
// shallow: the history's memory (the records of the timers of the last
// blocks) reaches its steady state within a benchmark's warm-up. The
// per-operation work is the same at any depth.
const benchRollbackDepth = 8

func newEngine(tb testing.TB) *engine.Engine {
	return newEngineDepth(tb, benchRollbackDepth)
}

func newEngineDepth(tb testing.TB, depth uint64) *engine.Engine {
	cfg := engine.DefaultConfig()
	cfg.RollbackDepth = depth
	e, err := engine.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// delayCount is the length of a steady driver's table of delays, a power of
// two: the index is a mask, where a table of any length took a 64-bit
// division, in the time of every Schedule the driver makes.
const delayCount = 1 << 16

// steady drives an engine through blocks that each schedule perBlock timers
// at delays spread over 1..2d-1 and fire what is due, so that about
// perBlock*d timers stay pending and as many fire as are scheduled.
type steady struct {
	tb      testing.TB
	e       *engine.Engine
	tx      engine.Tx // zero (closed) between transactions
	payload []byte
	delays  *[delayCount]uint64
	nonce   uint64 // each schedule has its own, so no id repeats
	actor   int
	inTx    int
	inBlock int
	fired   int
}

// newSteady returns the driver at the start of a block, after enough blocks
// that pending, buffers and free lists have reached their steady state.
func newSteady(tb testing.TB, pending int, payload []byte) *steady {
	d := uint64(max(1, pending/perBlock))
	r := rand.New(rand.NewPCG(5, 6))
	s := &steady{tb: tb, e: newEngine(tb), payload: payload, delays: new([delayCount]uint64)}
	for k := range s.delays {
		s.delays[k] = 1 + r.Uint64N(2*d-1)
	}
	if err := s.e.BeginBlock(1); err != nil {
		tb.Fatal(err)
	}
	// The longest delay is 2d-1 blocks; the rollback history's buffers
	// reach their size within some hundred blocks.
	for range max(2*d, 256) {
		s.fill()
		s.next()
	}
	return s
}

// schedule makes one Schedule call, first moving to the next transaction
// when the current one has made perTx calls.
func (s *steady) schedule() {
	if s.tx == (engine.Tx{}) || s.inTx == perTx {
		s.closeTx()
		tx, err := s.e.Begin(actors[s.actor%nActors], 0)
		if err != nil {
			s.tb.Fatal(err)
		}
		s.tx, s.inTx = tx, 0
		s.actor++
	}
	s.nonce++
	s.tx.SetNonce(s.nonce)
	h := s.e.Height() + s.delays[s.nonce%delayCount]
	if _, _, err := s.tx.Schedule(h, s.payload); err != nil {
		s.tb.Fatal(err)
	}
	s.inTx++
	s.inBlock++
}

func (s *steady) closeTx() {
	if s.tx != (engine.Tx{}) {
		if err := s.tx.Commit(); err != nil {
			s.tb.Fatal(err)
		}
		s.tx = engine.Tx{}
	}
}

// fill makes the rest of the block's schedules and commits them.
func (s *steady) fill() {
	for s.inBlock < perBlock {
		s.schedule()
	}
	s.closeTx()
}

// next ends the block, firing what is due, commits it and opens the next.
func (s *steady) next() {
	r, err := s.e.EndBlock(nop)
	if err != nil {
		s.tb.Fatal(err)
	}
	s.fired += r.Fired
	if err := s.e.Commit(); err != nil {
		s.tb.Fatal(err)
	}
	if err := s.e.BeginBlock(r.Height + 1); err != nil {
		s.tb.Fatal(err)
	}
	s.inBlock = 0
}

// tierHeights returns heights above 1 that the default layout keeps in the
// ring, the epoch tier or the overflow tier while the engine is at block 1.
func tierHeights(tier calendar.Tier, n int) []uint64 {
	l := calendar.DefaultLayout
	lo, span := uint64(2), l.RingSize-2
	switch tier {
	case calendar.TierEpoch:
		lo, span = l.RingSize, l.EpochLength*l.EpochCount
	case calendar.TierOverflow:
		lo, span = l.RingSize+l.EpochLength*l.EpochCount, 1<<24
	}
	r := rand.New(rand.NewPCG(7, uint64(tier)))
	hs := make([]uint64, n)
	for k := range hs {
		hs[k] = lo + r.Uint64N(span)
	}
	return hs
}

// canceller keeps a pool of pending timers, all in block 1, and cancels the
// oldest, perTx per transaction of the actor that owns them; refill
// schedules replacements in the slots cancelled since the last refill.
type canceller struct {
	tb      testing.TB
	e       *engine.Engine
	tx      engine.Tx
	ids     []engine.TimerID // slot k: the timer of group k/perTx
	heights []uint64         // a slot's height; len(heights) == len(ids)
	nonce   uint64
	k       int // slots cancelled so far
	filled  int // slots scheduled so far
}

func newCanceller(tb testing.TB, heights []uint64) *canceller {
	// Rollback off: the canceller stays in one block, whose undo history
	// would grow with every cancel (a block's history is dropped only once
	// the block is RollbackDepth blocks old).
	c := &canceller{tb: tb, e: newEngineDepth(tb, 0), ids: make([]engine.TimerID, len(heights)), heights: heights}
	if err := c.e.BeginBlock(1); err != nil {
		tb.Fatal(err)
	}
	c.refill(len(heights))
	return c
}

// owner is the actor of slot k's group.
func (c *canceller) owner(k int) engine.Address {
	return actors[(k/perTx)%nActors]
}

// refill schedules the next n slots, which must be free, perTx per
// transaction.
func (c *canceller) refill(n int) {
	for end := c.filled + n; c.filled < end; {
		tx, err := c.e.Begin(c.owner(c.filled), 0)
		if err != nil {
			c.tb.Fatal(err)
		}
		for range perTx {
			slot := c.filled % len(c.ids)
			c.nonce++
			tx.SetNonce(c.nonce)
			id, _, err := tx.Schedule(c.heights[slot], nil)
			if err != nil {
				c.tb.Fatal(err)
			}
			c.ids[slot] = id
			c.filled++
		}
		if err := tx.Commit(); err != nil {
			c.tb.Fatal(err)
		}
	}
}

// cancel makes one Cancel call, committing the previous transaction and
// opening the owner's when a group starts. It needs a refill at least every
// len(ids) calls.
func (c *canceller) cancel() {
	if c.k%perTx == 0 {
		c.closeTx()
		tx, err := c.e.Begin(c.owner(c.k), 0)
		if err != nil {
			c.tb.Fatal(err)
		}
		c.tx = tx
	}
	if _, err := c.tx.Cancel(c.ids[c.k%len(c.ids)]); err != nil {
		c.tb.Fatal(err)
	}
	c.k++
}

func (c *canceller) closeTx() {
	if c.tx != (engine.Tx{}) {
		if err := c.tx.Commit(); err != nil {
			c.tb.Fatal(err)
		}
		c.tx = engine.Tx{}
	}
}
