package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/wal"
)

// node drives an engine the way a node does, with every kind of call in
// every block: payloads empty, raw, large and routed to a handler; fee
// arguments under the lane, some clamped, and extends; cancels of its own
// timers, of timers already gone and inside reverted transactions; the
// lane's system cancel and extend; handlers that schedule and handlers
// that fail; an observer of every event; the state root asked for after
// each Commit. Its pending set is bounded (each actor keeps at most
// nodeFar timers in the overflow tier, cancelling its oldest), its
// steady state reached in some 3,500 blocks; a burst first (burst) takes
// the engine past the highs that growth reaches in the test's window, so
// that allocations that go on there are a fault, not growth.
type node struct {
	tb     testing.TB
	e      *engine.Engine
	r      *rand.Rand
	lane   bool
	nonce  uint64
	recent [1024]engine.TimerID                // ids to cancel, any actor's
	far    [nodeActors][nodeFar]engine.TimerID // each actor's overflow timers
	events int
}

const (
	nodeActors = 64
	nodeFar    = 8
	nodeTxs    = 16 // transactions per block, an actor each
	nodeCalls  = 12 // schedules per transaction
)

var nodePayloads = [][]byte{
	nil,
	make([]byte, 32),
	[]byte(`{"_handler":"tick","n":12345}`),
	make([]byte, 2048),
	[]byte(`{"_handler":"x","a":[1,2,3]}`),
	make([]byte, 300),
}

var errHandler = errors.New("the handler failed")

// nodeSystem is the system deployer of the lane's nodes.
var nodeSystem = engine.Address{0x5e}

// The node observes every event, and counts them.
func (n *node) Fired(*engine.Delivery, engine.FireResult)            { n.events++ }
func (n *node) Collected(engine.TimerID, engine.GCReason)            { n.events++ }
func (n *node) Deferred(engine.TimerID, engine.DeferReason)          { n.events++ }
func (n *node) Clamped(engine.TimerID, engine.Amount, engine.Amount) { n.events++ }

// Execute reschedules from a handler in one block of 4 and fails every
// handler of one block in 7.
func (n *node) Execute(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
	if d.Block%4 == 0 {
		n.nonce++
		tx.SetNonce(n.nonce)
		p := nodePayloads[n.nonce%uint64(len(nodePayloads))]
		if _, _, err := tx.Schedule(d.Block+1+n.nonce%50, p); err != nil {
			return engine.Usage{}, err
		}
	}
	if d.Block%7 == 0 {
		return engine.Usage{}, errHandler
	}
	return engine.Usage{Cycles: 1000}, nil
}

// newNode opens an engine in dir ("" for one in memory) at block 1; under
// the lane, it activates at block 10.
func newNode(tb testing.TB, dir string, lane, root bool) *node {
	cfg := engine.DefaultConfig()
	cfg.StateRoot = root
	cfg.RollbackDepth = 16
	cfg.Sync = wal.SyncNone     // the fsync allocates nothing; it only slows the test
	cfg.SnapshotEvery = 1 << 30 // a snapshot allocates its encoding (docs/DURABILITY.md)
	if lane {
		cfg.Policy = engine.PolicyLane
		cfg.ActivationHeight = 10
		cfg.Lane.FairnessWindowBlocks = 16
		cfg.SystemDeployers = []engine.Address{nodeSystem}
	}
	var e *engine.Engine
	var err error
	if dir == "" {
		e, err = engine.New(cfg)
	} else {
		e, err = engine.Open(dir, cfg)
	}
	if err != nil {
		tb.Fatal(err)
	}
	if dir != "" {
		tb.Cleanup(func() { e.Close() })
	}
	big, _ := engine.ParseAmount("1000000000000000000000000")
	for a := range nodeActors {
		if err := e.Ledger().Credit(actors[a], big); err != nil {
			tb.Fatal(err)
		}
	}
	if err := e.BeginBlock(1); err != nil {
		tb.Fatal(err)
	}
	n := &node{tb: tb, e: e, r: rand.New(rand.NewPCG(1, 2)), lane: lane}
	e.SetObserver(n)
	return n
}

// burst schedules n timers due at height at, spread over the actors, with
// the workload's payloads: a peak of pending timers, payloads and due
// timers that the steady workload stays below.
func (n *node) burst(count int, at uint64) {
	for a := range nodeActors {
		tx, err := n.e.Begin(actors[a], 0)
		if err != nil {
			n.tb.Fatal(err)
		}
		for k := range count / nodeActors {
			n.nonce++
			tx.SetNonce(n.nonce)
			if _, _, err := tx.Schedule(at, nodePayloads[k%len(nodePayloads)]); err != nil {
				n.tb.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			n.tb.Fatal(err)
		}
	}
}

// block runs the open block's transactions, ends and commits it, asks for
// the root and opens the next block.
func (n *node) block() {
	e := n.e
	h := e.Height()
	for t := range nodeTxs {
		a := (int(h)*nodeTxs + t) % nodeActors
		tx, err := e.Begin(actors[a], 0)
		if err != nil {
			n.tb.Fatal(err)
		}
		for k := range nodeCalls {
			n.schedule(tx, a, k)
		}
		for k := range 3 {
			tx.Cancel(n.pick(k)) // pending or not, ours or not
		}
		if n.lane && h >= 10 {
			tx.Extend(n.pick(3), h+50) // pending or not, ours or not, valid or not
		}
		if t%5 == 0 {
			err = tx.Revert()
		} else {
			err = tx.Commit()
		}
		if err != nil {
			n.tb.Fatal(err)
		}
	}
	if n.lane && h >= 10 {
		e.SystemCancel(nodeSystem, n.pick(4))
		e.SystemExtend(nodeSystem, n.pick(5), h+60)
	}
	if _, err := e.EndBlock(n); err != nil {
		n.tb.Fatal(err)
	}
	if err := e.Commit(); err != nil {
		n.tb.Fatal(err)
	}
	_ = e.Root()
	if err := e.BeginBlock(h + 1); err != nil {
		n.tb.Fatal(err)
	}
}

// pick is one of the recent ids.
func (n *node) pick(k int) engine.TimerID {
	return n.recent[(n.nonce*7+uint64(k)*13)%uint64(len(n.recent))]
}

// schedule makes actor a's k-th schedule of the transaction: most due
// within 40 blocks, some in the epoch tier, one in the overflow tree.
func (n *node) schedule(tx engine.Tx, a, k int) {
	h := n.e.Height()
	n.nonce++
	tx.SetNonce(n.nonce)
	p := nodePayloads[(int(n.nonce)+k)%len(nodePayloads)]
	at := h + 1 + n.r.Uint64N(40)
	switch {
	case k == 4 && h%2 == 0:
		at = h + 500 + n.r.Uint64N(3000)
	case k == 5:
		at = h + 100_000 + n.r.Uint64N(100_000)
	}
	var id engine.TimerID
	var err error
	if n.lane && h >= 10 && k%3 == 0 {
		f := engine.Fees{Set: engine.HasGasLimit | engine.HasMaxPriorityFee | engine.HasExpiresAt,
			GasLimit: 5000, MaxPriorityFee: engine.Amount{Lo: uint64(k)}, ExpiresAt: at + 3}
		if k == 9 { // a max fee of twice the basefee: the priority fee is clamped
			f.Set |= engine.HasMaxFee
			f.MaxFee, f.MaxPriorityFee = n.e.Basefee().Add(n.e.Basefee()), n.e.Basefee().Add64(1)
		}
		var s engine.Scheduled
		s, err = tx.ScheduleFees(at, p, &f)
		id = s.ID
	} else {
		id, _, err = tx.Schedule(at, p)
	}
	if err != nil {
		n.tb.Fatal(err)
	}
	if k == 5 {
		old := &n.far[a][n.nonce%nodeFar]
		tx.Cancel(*old) // it may be gone: cancelled below, or reverted
		*old = id
	}
	n.recent[n.nonce%uint64(len(n.recent))] = id
}

// TestNodeBlockAllocs: a node's blocks allocate nothing once the engine
// has grown to the workload, in memory and durable, under both policies,
// with and without the state root (up to a chunk now and then where the
// workload still grows: below).
func TestNodeBlockAllocs(t *testing.T) {
	for _, c := range []struct{ durable, lane, root bool }{
		{false, false, false}, {false, true, true}, {true, false, true}, {true, true, false},
	} {
		t.Run(fmt.Sprintf("durable=%v/lane=%v/root=%v", c.durable, c.lane, c.root), func(t *testing.T) {
			dir := ""
			if c.durable {
				dir = t.TempDir()
			}
			n := newNode(t, dir, c.lane, c.root)
			n.burst(40_000, 1000)
			for range 1500 {
				n.block()
			}
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			for range 200 {
				n.block()
			}
			runtime.ReadMemStats(&m1)
			// Counted, not AllocsPerRun's figure, which rounds one
			// allocation every other block down to 0. The workload's
			// pending set still grows here (its epoch-tier timers reach
			// their steady state in some 3,500 blocks), and a new high
			// grows a chunk of the payload pool, the due list or a slab:
			// the burst took every pool past the window's highs first.
			// 0 or 1 allocation over these 200 blocks in each node
			// (session 45); without the burst, 7 and 9 in the fifo nodes
			// and 26 and 30 in the lane's, where one a block would be 200.
			got := m1.Mallocs - m0.Mallocs
			t.Logf("%d allocations over 200 blocks", got)
			if got > 20 {
				t.Errorf("%d allocations over 200 blocks, want at most 20", got)
			}
			if p := n.e.Pending(); p < 5000 || n.events < 100_000 {
				t.Fatalf("only %d timers pending, %d events; the test measures too little", p, n.events)
			}
		})
	}
}
