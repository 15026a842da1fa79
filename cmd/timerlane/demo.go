package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/wal"
)

const demoHelp = `usage: timerlane demo [flags]

Runs a deterministic scenario on an engine with the default config (in
memory; durable, with the state root on, under --dir) and prints what it
measured. Many actors send transactions that
schedule one-shot timers (most a few blocks ahead, some tens of thousands
and some over 8 million blocks ahead, so that they start in the ring, the
epoch tier or the overflow tree) and cancel some of their own; one actor in
ten keeps a heartbeat that reschedules itself from its handler. After the
load blocks the demo drains: it jumps over empty stretches with SkipEmpty
and runs every block in which something is due, until no timer is pending.
Progress goes to stderr, the summary table to stdout. An interrupt (Ctrl-C)
or SIGTERM stops the run between blocks: it says after which block, closes
DIR cleanly under --dir, and exits with status 130; the same command with
--resume goes on with it, as after a crash.

Flags:
`

// Sizing bounds: they keep the demo within memory a laptop has.
const (
	maxTimers = 100_000_000
	maxActors = 10_000_000
	maxBlocks = 10_000_000
)

type demoConfig struct {
	timers, actors, blocks int
	seed                   uint64
	quiet, resume          bool
	dir                    string
	reserve                int
}

// parseDemoFlags returns the config, or ok == false with the exit code.
func parseDemoFlags(args []string, stdout, stderr io.Writer) (c demoConfig, code int, ok bool) {
	fs := flag.NewFlagSet("timerlane demo", flag.ContinueOnError)
	var msg bytes.Buffer // the usage goes to stdout when asked for, else to stderr
	fs.SetOutput(&msg)
	if len(args) == 1 && args[0] == "help" {
		args = []string{"-h"}
	}
	fs.IntVar(&c.timers, "timers", 1_000_000, "timers to schedule over the run, `N` in [1, "+commas(maxTimers)+"] (heartbeat\nreschedules included)")
	fs.IntVar(&c.actors, "actors", 10_000, "actors sending transactions, `N` in [1, "+commas(maxActors)+"]")
	fs.Uint64Var(&c.seed, "seed", 1, "seed `N` of the scenario's random choices: the same seed gives the same counts")
	fs.IntVar(&c.blocks, "blocks", 0, "`N` load blocks, in [0, "+commas(maxBlocks)+"]: the blocks whose transactions\nschedule the timers (0: timers/500, at least 100)")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress on stderr")
	fs.IntVar(&c.reserve, "reserve", 0, "reserve room for `N` timers before the first block (Engine.Reserve), as a\nnode that knows its scale would: no call then waits for the engine's memory\nto grow (0: none; at most "+commas(maxTimers)+")")
	fs.StringVar(&c.dir, "dir", "", "persist to `DIR`: a write-ahead log with an fsync per block and periodic\nsnapshots, and the state root on (DIR must be new or empty, unless --resume;\ninspect it afterwards with timerlane inspect DIR). The fsyncs make the run\nslower: the default scenario's 183,000 blocks take a minute or more")
	fs.BoolVar(&c.resume, "resume", false, "with --dir, go on with the run DIR holds (one interrupted or killed, made\nwith the same flags): the scenario runs again in memory up to DIR's last\nblock, its state root there must equal DIR's, and the run goes on from DIR.\nA DIR that holds no block yet starts at block 1, so the same command line\nserves every restart")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), demoHelp)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			stdout.Write(msg.Bytes())
			return c, 0, false
		}
		// One line naming the flag, as for the checks below (the flag
		// package's message, without the usage it printed after it).
		fmt.Fprintf(stderr, "timerlane demo: %v (see timerlane demo --help)\n", err)
		return c, 2, false
	}
	bad := func(format string, a ...any) (demoConfig, int, bool) {
		fmt.Fprintf(stderr, "timerlane demo: "+format+" (see timerlane demo --help)\n", a...)
		return c, 2, false
	}
	dirSet := false
	fs.Visit(func(f *flag.Flag) { dirSet = dirSet || f.Name == "dir" })
	switch {
	case dirSet && c.dir == "":
		return bad("--dir: empty; give a directory, or no --dir to run in memory")
	case c.resume && !dirSet:
		return bad("--resume: needs --dir, the directory whose run it goes on with")
	case fs.NArg() > 0:
		return bad("unexpected argument %q", fs.Arg(0))
	case c.timers < 1 || c.timers > maxTimers:
		return bad("--timers %d: must be in [1, %s]", c.timers, commas(maxTimers))
	case c.actors < 1 || c.actors > maxActors:
		return bad("--actors %d: must be in [1, %s]", c.actors, commas(maxActors))
	case c.blocks < 0 || c.blocks > maxBlocks:
		return bad("--blocks %d: must be in [0, %s]", c.blocks, commas(maxBlocks))
	case c.reserve < 0 || c.reserve > maxTimers:
		return bad("--reserve %d: must be in [0, %s]", c.reserve, commas(maxTimers))
	}
	if c.blocks == 0 {
		c.blocks = max(100, c.timers/500)
	}
	return c, 0, true
}

func demoCmd(args []string, stdout, stderr io.Writer) int {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(stop)
	return demoUntil(args, stop, stdout, stderr)
}

// demoUntil is demoCmd, stopped by a value on stop.
func demoUntil(args []string, stop <-chan os.Signal, stdout, stderr io.Writer) int {
	c, code, ok := parseDemoFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	prog := newProgress(stderr, c.quiet, 2*c.timers)
	s, err := newScenario(c, prog)
	if err == nil {
		s.stop = stop
		err = s.run()
	}
	if errors.Is(err, errInterrupted) {
		prog.abort()
		held := s.resumeAt // DIR is not open while --resume catches up
		if s.catchingUp {
			fmt.Fprintf(stderr, "timerlane demo: interrupted after block %d, running again in memory the blocks up to %d\n", s.height, s.resumeAt)
		} else {
			fmt.Fprintf(stderr, "timerlane demo: interrupted after block %d\n", s.height)
		}
		if d := s.dirEngine(); d != nil {
			if err := d.Close(); err != nil {
				fmt.Fprintf(stderr, "timerlane demo: closing %s: %s\n", c.dir, msg(err))
				return 1
			}
			held = d.Height()
		}
		if c.dir != "" {
			fmt.Fprintf(stderr, "timerlane demo: %s holds the blocks up to %d (timerlane inspect %s; --resume goes on)\n", c.dir, held, shellQuote(c.dir))
		}
		return 130 // as a shell reports a command killed by SIGINT
	}
	if err != nil {
		prog.abort()
		fmt.Fprintf(stderr, "timerlane demo: %s\n", msg(err))
		if d := s.dirEngine(); d != nil {
			d.Close() // the blocks it committed are durable already
		}
		if errors.Is(err, errBadDir) {
			return 2
		}
		return 1
	}
	s.report(stdout)
	if c.dir != "" {
		root := s.e.Root()
		if err := s.e.Close(); err != nil {
			fmt.Fprintf(stderr, "timerlane demo: closing %s: %s\n", c.dir, msg(err))
			return 1
		}
		fmt.Fprintf(stdout, "\npersisted to %s: height %d, root 0x%x (timerlane inspect %s)\n", c.dir, s.height, root, shellQuote(c.dir))
	}
	return 0
}

// Timer kinds. A one-shot's kind is the tier it was first placed in, so
// the table can say where the fired timers came from.
const (
	kindHeartbeat = iota
	kindRing
	kindEpoch
	kindOverflow
	numKinds
)

var kindNames = [numKinds]string{"heartbeat (tick)", "one-shot from ring", "one-shot from epoch tier", "one-shot from overflow"}

// heartbeatPayload routes to handler "tick" with an empty payload.
var heartbeatPayload = []byte(`{"_handler":"tick","_payload":""}`)

// Shapes of the scenario.
const (
	tasks         = 4  // one-shot payloads per tier: few, so that a tx scheduling a task twice for one height gets DuplicateTimer
	heldPerActor  = 4  // recent timers an actor remembers, to cancel one later
	hotShare      = 25 // 1 transaction in hotShare comes from a hot actor
	cancelPercent = 10 // transactions that cancel one of the actor's timers
	revertPercent = 2  // transactions that revert (all their calls undone)
	heartbeatEach = 10 // one actor in heartbeatEach keeps a heartbeat
)

type actorState struct {
	nonce  uint64
	period uint64 // heartbeat period in blocks; 0 for other actors
	held   [heldPerActor]heldTimer
}

// heldTimer is a timer the actor scheduled and may cancel. It is pending
// while height >= the current block: a timer fires at its height's end.
type heldTimer struct {
	id     engine.TimerID
	height uint64 // 0: empty slot
	kind   uint8
}

// scenario runs the demo; it is also the engine's Executor.
type scenario struct {
	c    demoConfig
	stop <-chan os.Signal // an interrupt: the run stops between blocks
	e    *engine.Engine
	// Under --resume, e (in memory) first catches up with the chain DIR
	// holds, whose height and root a read-only look gave: at block
	// resumeAt, takeOver checks the roots and puts DIR's engine in e.
	resumeAt   uint64
	resumeRoot [32]byte
	catchingUp bool
	opsBefore  uint64 // the operations the catch-up ran, out of the throughput
	cfg        engine.Config
	rng        *rand.Rand
	prog       *progress
	actors     []actorState
	hot        int // actors 0..hot-1 are hot: they hit the per-actor cap
	payloads   [numKinds][tasks][]byte

	height, loadEnd, maxDue uint64
	ticking                 bool // heartbeats reschedule: only while loading
	hbBudget                int  // heartbeats take at most a quarter of the timers

	scheduled, fired, cancelled [numKinds]int
	total                       int // scheduled, all kinds
	tooMany, dup                int // calls rejected with TooManyTimers, DuplicateTimer
	txs, reverted               int
	blockFired                  int    // sum of BlockResult.Fired: cross-checks fired
	fatal                       error  // first unexpected error inside a handler
	checksum                    uint32 // what the handlers' trivial work computes

	drainBlocks, skipped int
	drainEmpty           int             // drain blocks in which nothing fired
	loadLat, drainLat    []time.Duration // EndBlock+Commit per block run
	beginMax             time.Duration   // slowest BeginBlock (epoch maintenance, history growth)
	skipMax              time.Duration   // slowest SkipEmpty
	skipMaxBlocks        uint64          // the blocks that one jumped

	peak       engine.Stats
	peakHeight uint64
	atPeak     struct { // measured at the end of the load blocks, where pending peaks
		pending, heap int
		stats         engine.Stats
	}
	steadyOps, steadyMallocs uint64
	steadyFrom               uint64
	start                    time.Time
	wall                     time.Duration
	baseHeap                 uint64
}

func newScenario(c demoConfig, prog *progress) (*scenario, error) {
	s := &scenario{
		c: c, prog: prog, cfg: engine.DefaultConfig(),
		rng:      rand.New(rand.NewPCG(c.seed, 0x7469_6d65_726c_616e)),
		actors:   make([]actorState, c.actors),
		hot:      max(1, c.actors/2000),
		loadEnd:  uint64(c.blocks),
		ticking:  true,
		hbBudget: c.timers / 4,
		// Preallocated so that the heap measured at peak is the engine's.
		loadLat: make([]time.Duration, 0, c.blocks),
	}
	for i := heartbeatEach - 1; i < c.actors; i += heartbeatEach {
		s.actors[i].period = 4 + s.rng.Uint64N(12) // every 4 to 15 blocks
	}
	for k := kindRing; k < numKinds; k++ {
		for t := range tasks {
			s.payloads[k][t] = []byte(fmt.Sprintf("%c%d", "hreo"[k], t))
		}
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	s.baseHeap = m.HeapAlloc
	if c.dir == "" {
		e, err := engine.New(s.cfg)
		if err != nil {
			return s, err
		}
		s.e = e
		return s, e.Reserve(c.reserve)
	}
	s.cfg.StateRoot = true
	holdsChain := func(h uint64) error {
		return fmt.Errorf("%w: --dir %s already holds a chain at height %d: the demo starts from block 1, give it a new directory (or --resume, to go on with the run that made it)", errBadDir, c.dir, h)
	}
	entries, err := os.ReadDir(c.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // a missing one, Open creates
		return s, fmt.Errorf("--dir: %w", readDirError(err))
	}
	for _, x := range entries {
		// A crash's temporary files are the log's: Open removes them.
		if n := x.Name(); !wal.IsLogFile(n) && !wal.IsTempFile(n) {
			return s, fmt.Errorf("%w: --dir %s holds %s: give it a new or empty directory", errBadDir, c.dir, n)
		}
	}
	// A log already: look at it read-only first, so that refusing it, or
	// catching up with it, changes nothing (opening it for writing cuts a
	// torn tail, for one). A log that cannot be read so (a rollback that
	// a crash stopped half way keeps readers out) is opened for writing,
	// which ends what the crash left, and closed again.
	if logDir(c.dir) == nil {
		w := log.Writer()
		log.SetOutput(io.Discard) // quietly: the Open below reports what it cuts
		ro, err := openDir(c.dir, false)
		log.SetOutput(w)
		if err != nil {
			ro, err = engine.Open(c.dir, s.cfg)
		}
		if err != nil {
			return s, err
		}
		h, root := ro.Height(), ro.Root()
		if err := ro.Close(); err != nil {
			return s, err
		}
		switch {
		case h > 0 && !c.resume:
			return s, holdsChain(h)
		case h > 0:
			// The scenario's own state (its random source, what each
			// actor holds, the counts) is not in the log: it is made
			// again by running the blocks up to DIR's in memory, checked
			// against DIR's root there (takeOver).
			s.resumeAt, s.resumeRoot, s.catchingUp = h, root, true
			prog.note(fmt.Sprintf("timerlane demo: %s holds the blocks up to %d: running them again in memory, then on from %s", c.dir, h, c.dir))
			s.e, err = engine.New(s.cfg)
			return s, err
		}
	}
	e, err := engine.Open(c.dir, s.cfg)
	if err != nil {
		return s, err
	}
	if e.Height() > 0 { // written since the look above
		e.Close()
		return s, holdsChain(e.Height())
	}
	s.e = e
	return s, e.Reserve(c.reserve)
}

// dirEngine is the engine open on --dir, if any: none while --resume
// catches up.
func (s *scenario) dirEngine() *engine.Engine {
	if s.c.dir == "" || s.catchingUp {
		return nil
	}
	return s.e
}

// takeOver runs after block h, the one after prev, while --resume catches
// up: at DIR's last block, if the state roots agree, DIR is opened for
// writing and its engine replaces the one in memory. What was measured so
// far was the catch-up's: it starts again.
func (s *scenario) takeOver(prev, h uint64) error {
	switch {
	case h < s.resumeAt:
		return nil
	case h > s.resumeAt:
		return fmt.Errorf("%w: --dir %s holds a chain at height %d, a block this scenario does not run (it runs %d after %d): it was made with other flags or another seed", errBadDir, s.c.dir, s.resumeAt, h, prev)
	}
	if got := s.e.Root(); got != s.resumeRoot {
		return fmt.Errorf("%w: --dir %s holds a chain whose root at height %d is 0x%x; this scenario's is 0x%x there: it was made with other flags or another seed", errBadDir, s.c.dir, h, s.resumeRoot, got)
	}
	e, err := engine.Open(s.c.dir, s.cfg)
	if err != nil {
		return err
	}
	if e.Height() != h || e.Root() != s.resumeRoot {
		e.Close()
		return fmt.Errorf("--dir %s changed while the demo caught up with it: height %d, root 0x%x, where it read %d and 0x%x", s.c.dir, e.Height(), e.Root(), h, s.resumeRoot)
	}
	if err := e.Reserve(s.c.reserve); err != nil {
		e.Close()
		return err
	}
	s.e, s.catchingUp = e, false
	s.loadLat, s.drainLat = s.loadLat[:0], s.drainLat[:0]
	s.beginMax, s.skipMax, s.skipMaxBlocks = -1, -1, 0 // -1: no block since
	s.start, s.opsBefore = time.Now(), s.ops()
	return nil
}

func actorAddr(i int) engine.Address {
	var a engine.Address
	copy(a[:], "timerlane-demo")
	binary.BigEndian.PutUint32(a[16:], uint32(i))
	return a
}

func actorIndex(a *engine.Address) int { return int(binary.BigEndian.Uint32(a[16:])) }

// tierOf is the tier a timer for height lands in when scheduled at cur:
// internal/calendar's rule, from the config's layout.
func tierOf(cfg engine.Config, cur, height uint64) int {
	w, e := cur/cfg.EpochLength, height/cfg.EpochLength
	ring := w + cfg.RingSize/cfg.EpochLength - 1
	switch {
	case e <= ring:
		return kindRing
	case e <= ring+cfg.EpochCount:
		return kindEpoch
	}
	return kindOverflow
}

func (s *scenario) run() error {
	s.start = time.Now()
	// The steady window is the second half of the load: the first fills
	// the engine's tables from nothing.
	half := s.loadEnd / 2
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	ops0 := s.ops()
	s.steadyFrom = 1
	for h := uint64(1); h <= s.loadEnd; h++ {
		if err := s.interrupted(); err != nil {
			return err
		}
		if err := s.block(h, true); err != nil {
			return err
		}
		if h == half {
			runtime.ReadMemStats(&m0)
			ops0, s.steadyFrom = s.ops(), h+1
		}
	}
	s.ticking = false
	s.measurePeak(&m0, ops0)

	// Drain: SkipEmpty stops before the next block with a due timer (or an
	// epoch holding one), so every block that matters runs for real.
	for s.e.Pending() > 0 {
		if err := s.interrupted(); err != nil {
			return err
		}
		t := time.Now()
		h, err := s.e.SkipEmpty(s.maxDue)
		if err != nil {
			return err
		}
		if d := time.Since(t); d > s.skipMax {
			s.skipMax, s.skipMaxBlocks = d, h-s.height
		}
		if h >= s.maxDue {
			return fmt.Errorf("engine bug? %d timers pending after the last due height %d", s.e.Pending(), s.maxDue)
		}
		s.skipped += int(h - s.height)
		fired := s.blockFired
		if err := s.block(h+1, false); err != nil {
			return err
		}
		s.drainBlocks++
		if s.blockFired == fired {
			s.drainEmpty++
		}
	}
	if s.catchingUp {
		return fmt.Errorf("%w: --dir %s holds a chain at height %d, past this scenario's last block %d: it was made with other flags or another seed", errBadDir, s.c.dir, s.resumeAt, s.height)
	}
	s.wall = time.Since(s.start)
	s.prog.done(s.ops(), s.height, s.total, s.sum(&s.fired))
	if s.blockFired != s.sum(&s.fired) {
		return fmt.Errorf("engine reported %d fires, the executor saw %d", s.blockFired, s.sum(&s.fired))
	}
	return nil
}

// resumed reports whether --resume caught up with DIR and went on from it.
func (s *scenario) resumed() bool { return s.resumeAt > 0 && !s.catchingUp }

// committed, when set (by tests), hears each block committed to --dir.
var committed func(h uint64)

// errInterrupted ends a run that a signal stopped.
var errInterrupted = errors.New("interrupted")

// interrupted returns errInterrupted once a signal has come.
func (s *scenario) interrupted() error {
	select {
	case <-s.stop:
		return errInterrupted
	default:
		return nil
	}
}

// block runs block h: transactions while loading, then end of block.
func (s *scenario) block(h uint64, load bool) error {
	t := time.Now()
	if err := s.e.BeginBlock(h); err != nil {
		return err
	}
	s.beginMax = max(s.beginMax, time.Since(t))
	prev := s.height
	s.height = h
	if load {
		if err := s.transactions(h); err != nil {
			return err
		}
	}
	t = time.Now()
	res, err := s.e.EndBlock(s)
	if err == nil {
		err = s.e.Commit()
	}
	now := time.Now()
	if err != nil {
		return err
	}
	if s.fatal != nil {
		return s.fatal
	}
	if load {
		s.loadLat = append(s.loadLat, now.Sub(t))
	} else {
		s.drainLat = append(s.drainLat, now.Sub(t))
	}
	if committed != nil && s.dirEngine() != nil {
		committed(h)
	}
	s.blockFired += res.Fired
	if p := s.e.Pending(); p > s.peak.Pending {
		s.peak, s.peakHeight = s.e.Stats(), h
	}
	s.prog.update(now, s.ops(), h, s.total, s.sum(&s.fired))
	if s.catchingUp {
		return s.takeOver(prev, h)
	}
	return nil
}

// transactions sends block h's transactions: enough that the timers
// scheduled so far follow a straight line to --timers at the last load
// block. Heartbeat reschedules count, so the quota shrinks by theirs.
func (s *scenario) transactions(h uint64) error {
	if h == 1 {
		if err := s.startHeartbeats(h); err != nil {
			return err
		}
	}
	quota := int(uint64(s.c.timers)*h/s.loadEnd) - s.total
	// Rejections (an actor at its cap) use up tries, not quota; the bound
	// keeps a block finite when few actors are all at their cap.
	for tries := 4*quota + 64; quota > 0 && tries > 0; tries-- {
		n, err := s.userTx(h, quota)
		if err != nil {
			return err
		}
		quota -= n
	}
	return nil
}

func (s *scenario) startHeartbeats(h uint64) error {
	for i := range s.actors {
		a := &s.actors[i]
		if a.period == 0 || s.scheduled[kindHeartbeat] >= s.hbBudget || s.total >= s.c.timers {
			continue
		}
		a.nonce++
		tx, err := s.e.Begin(actorAddr(i), a.nonce)
		if err != nil {
			return err
		}
		// Staggered, so that the ticks spread over the blocks.
		if err := s.schedule(tx, h+1+s.rng.Uint64N(a.period), heartbeatPayload, kindHeartbeat, nil); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		s.txs++
	}
	return nil
}

// userTx is one transaction of a random actor: maybe a cancel of one of its
// own pending timers, then 1 to 3 schedules. It returns how many timers it
// added (0 when it reverted).
func (s *scenario) userTx(h uint64, quota int) (int, error) {
	i := s.rng.IntN(s.c.actors)
	if s.rng.IntN(hotShare) == 0 {
		i = s.rng.IntN(s.hot)
	}
	a := &s.actors[i]
	a.nonce++
	tx, err := s.e.Begin(actorAddr(i), a.nonce)
	if err != nil {
		return 0, err
	}
	s.txs++
	// Decided up front: a reverted transaction leaves no trace, so the
	// bookkeeping below only follows transactions that commit.
	keep := s.rng.IntN(100) >= revertPercent
	cancelled := -1 // the kind of the timer cancelled, if any
	if s.rng.IntN(100) < cancelPercent {
		if ht := &a.held[s.rng.IntN(heldPerActor)]; ht.height >= h {
			if _, err := tx.Cancel(ht.id); err != nil {
				return 0, fmt.Errorf("cancel of a pending timer: %w", err)
			}
			cancelled = int(ht.kind)
			if keep {
				*ht = heldTimer{}
			}
		}
	}
	before := s.scheduled
	for n := min(1+s.rng.IntN(3), quota); n > 0; n-- {
		height := s.pickHeight(h)
		k := tierOf(s.cfg, h, height)
		var held *heldTimer
		if keep {
			held = &a.held[s.rng.IntN(heldPerActor)]
		}
		if err := s.schedule(tx, height, s.payloads[k][s.rng.IntN(tasks)], k, held); err != nil {
			return 0, err
		}
	}
	if !keep {
		s.reverted++
		s.scheduled = before
		s.total = s.sum(&s.scheduled)
		return 0, tx.Revert()
	}
	if cancelled >= 0 {
		s.cancelled[cancelled]++
	}
	return s.sum(&s.scheduled) - s.sum(&before), tx.Commit()
}

// pickHeight: 60% near (ring), 20% tens of thousands of blocks ahead
// (epoch tier), 20% up to a million blocks beyond the epoch tier's reach
// (overflow tree; 8.4 to 9.4 million blocks ahead under the default layout).
func (s *scenario) pickHeight(h uint64) uint64 {
	switch r := s.rng.IntN(10); {
	case r < 6:
		return h + 1 + s.rng.Uint64N(256)
	case r < 8:
		return h + 10_000 + s.rng.Uint64N(50_000)
	}
	reach := s.cfg.RingSize + s.cfg.EpochLength*s.cfg.EpochCount
	return h + reach + s.rng.Uint64N(1_000_001)
}

// schedule makes one call, counting the rejections the scenario provokes
// and failing on any other. held, if not nil, remembers the timer.
func (s *scenario) schedule(tx engine.Tx, height uint64, payload []byte, kind int, held *heldTimer) error {
	id, _, err := tx.Schedule(height, payload)
	switch {
	case err == nil:
		s.scheduled[kind]++
		s.total++
		s.maxDue = max(s.maxDue, height)
		if held != nil {
			*held = heldTimer{id: id, height: height, kind: uint8(kind)}
		}
	case errors.Is(err, engine.ErrTooManyTimers):
		s.tooMany++
	case errors.Is(err, engine.ErrDuplicateTimer):
		s.dup++
	default:
		return fmt.Errorf("schedule at %d in block %d: %w", height, s.height, err)
	}
	return nil
}

// Execute is the demo's handler: tick reschedules the heartbeat, every
// other timer gets a checksum of its payload as its work.
func (s *scenario) Execute(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
	// SkipEmpty jumps over most of the run, so check that nothing fires
	// late or early because of it.
	if d.Block != d.Height && s.fatal == nil {
		s.fatal = fmt.Errorf("engine bug: a timer due at %d fired in block %d", d.Height, d.Block)
	}
	if string(d.Handler) == "tick" {
		s.fired[kindHeartbeat]++
		u := engine.Usage{Cycles: 2_000}
		if !s.ticking || s.total >= s.c.timers || s.scheduled[kindHeartbeat] >= s.hbBudget {
			return u, nil // the heartbeat stops with the load
		}
		period := s.actors[actorIndex(&d.Actor)].period
		if err := s.schedule(tx, d.Block+period, heartbeatPayload, kindHeartbeat, nil); err != nil && s.fatal == nil {
			s.fatal = err
		}
		u.Cycles += s.cfg.ScheduleCycles
		return u, nil
	}
	k := kindRing // the payload's first letter names the tier: r, e or o
	if len(d.Payload) > 0 && d.Payload[0] == 'e' {
		k = kindEpoch
	} else if len(d.Payload) > 0 && d.Payload[0] == 'o' {
		k = kindOverflow
	}
	s.fired[k]++
	sum := uint32(2166136261)
	for _, b := range d.Payload {
		sum = (sum ^ uint32(b)) * 16777619
	}
	s.checksum ^= sum
	return engine.Usage{Cycles: 5_000 + 100*uint64(len(d.Payload))}, nil
}

// measurePeak runs after the last load block: pending peaks there, since
// afterwards nothing is scheduled. m0 and ops0 are taken at the start of
// the steady window.
func (s *scenario) measurePeak(m0 *runtime.MemStats, ops0 uint64) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	s.steadyOps = s.ops() - ops0
	s.steadyMallocs = m.Mallocs - m0.Mallocs
	runtime.GC()
	runtime.ReadMemStats(&m)
	s.atPeak.pending = s.e.Pending()
	s.atPeak.heap = int(m.HeapAlloc) - int(s.baseHeap)
	s.atPeak.stats = s.e.Stats()
}

func (s *scenario) sum(a *[numKinds]int) int {
	n := 0
	for _, v := range a {
		n += v
	}
	return n
}

// ops counts schedules, cancels and fires: the engine operations.
func (s *scenario) ops() uint64 {
	return uint64(s.total + s.sum(&s.cancelled) + s.sum(&s.fired))
}

func (s *scenario) report(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	c := s.c
	fmt.Fprintf(tw, "timerlane demo: %s timers, %s actors, seed %d, %s load blocks\n\n",
		commas(c.timers), commas(c.actors), c.seed, commas(c.blocks))

	fmt.Fprintf(tw, "TIMERS\tSCHEDULED\tFIRED\tCANCELLED\tPENDING\n")
	for k := range numKinds {
		fmt.Fprintf(tw, "%s\t%11s\t%11s\t%11s\t\n", kindNames[k], commas(s.scheduled[k]), commas(s.fired[k]), commas(s.cancelled[k]))
	}
	fmt.Fprintf(tw, "total\t%11s\t%11s\t%11s\t%11s\n\n", commas(s.total), commas(s.sum(&s.fired)), commas(s.sum(&s.cancelled)), commas(s.e.Pending()))

	row := func(label, value, unit string) { fmt.Fprintf(tw, "%s\t%11s\t%s\n", label, value, unit) }
	heartbeats := 0
	for _, a := range s.actors {
		if a.period > 0 {
			heartbeats++
		}
	}
	row("actors", commas(c.actors), fmt.Sprintf("actors (%s hot, %s with a heartbeat)", commas(s.hot), commas(heartbeats)))
	row("transactions", commas(s.txs), fmt.Sprintf("txs (%s reverted)", commas(s.reverted)))
	row("rejected TooManyTimers", commas(s.tooMany), fmt.Sprintf("calls (cap %d pending per actor)", s.cfg.MaxTimersPerActor))
	row("rejected DuplicateTimer", commas(s.dup), "calls (same actor, height, payload, nonce)")
	row("load blocks", commas(c.blocks), "blocks (transactions and fires)")
	row("drain blocks run", commas(s.drainBlocks), fmt.Sprintf("blocks (%s of them fired nothing)", commas(s.drainEmpty)))
	row("empty blocks skipped", commas(s.skipped), "blocks (SkipEmpty)")
	row("final height", commas(int(s.height)), "")
	if s.resumed() {
		row("resumed after block", commas(int(s.resumeAt)), "(--resume: the blocks up to it ran again in memory and matched DIR's root; the times below are of the blocks after it)")
	}
	ps := s.peak
	row("peak pending", commas(ps.Pending), fmt.Sprintf("timers at height %s: ring %s, epoch tier %s, overflow %s",
		commas(int(s.peakHeight)), commas(ps.InRing), commas(ps.InEpochs), commas(ps.InOverflow)))
	row("records in use", commas(ps.Records), "at that height: the pending timers' and the rollback history's (--reserve room)")
	fmt.Fprintln(tw)

	p := max(1, s.atPeak.pending)
	st := s.atPeak.stats
	eng := st.ArenaBytes + st.IndexBytes + st.DataBytes
	row("heap at end of load", mib(s.atPeak.heap), fmt.Sprintf("MiB for %s pending (after GC, minus the baseline)", commas(s.atPeak.pending)))
	row("heap per pending timer", strconv.Itoa(s.atPeak.heap/p), "B/timer")
	row("engine.Stats bytes", mib(eng), fmt.Sprintf("MiB (arena %s, id index %s, payloads %s)", mib(st.ArenaBytes), mib(st.IndexBytes), mib(st.DataBytes)))
	row("engine.Stats per pending timer", strconv.Itoa(eng/p), "B/timer")
	window := ""
	if s.resumed() && s.resumeAt >= s.steadyFrom {
		window = fmt.Sprintf("; up to %s in memory, catching up", commas(int(s.resumeAt)))
	}
	row("allocations", fmt.Sprintf("%.4f", float64(s.steadyMallocs)/float64(max(1, s.steadyOps))),
		fmt.Sprintf("allocs/op (%s mallocs over %s schedules+cancels+fires, blocks %s-%s%s)",
			commas(int(s.steadyMallocs)), commas(int(s.steadyOps)), commas(int(s.steadyFrom)), commas(c.blocks), window))
	fmt.Fprintln(tw)

	for _, l := range []struct {
		name string
		d    []time.Duration
	}{{"load", s.loadLat}, {"drain", s.drainLat}} {
		slices.Sort(l.d)
		at := func(q float64) string {
			if len(l.d) == 0 { // all before the block --resume went on from
				return "-"
			}
			return micros(quantile(l.d, q))
		}
		row("end of block, "+l.name+" p50", at(0.50), fmt.Sprintf("µs (EndBlock+Commit, %s blocks)", commas(len(l.d))))
		row("end of block, "+l.name+" p99", at(0.99), "µs")
		row("end of block, "+l.name+" max", at(1), "µs")
	}
	// Besides the tiers' epoch maintenance, BeginBlock grows the rollback
	// history's buffers in the load's first few hundred blocks, 0.1-0.5
	// ms at a time (session 32).
	maxOf := func(d time.Duration) string {
		if d < 0 { // no block since --resume caught up
			return "-"
		}
		return micros(d)
	}
	row("begin block max", maxOf(s.beginMax), "µs (BeginBlock: epoch maintenance, history growth)")
	// A jump moves every timer that comes into range on the way, in one
	// call: its time follows what it moves, not one block's share.
	row("skip empty max", maxOf(s.skipMax), fmt.Sprintf("µs (SkipEmpty over %s blocks)", commas(int(s.skipMaxBlocks))))
	since := ""
	if s.resumed() {
		since = ", since --resume caught up"
	}
	row("wall time", fmt.Sprintf("%.2f", s.wall.Seconds()), "s"+since)
	row("throughput", commas(int(float64(s.ops()-s.opsBefore)/s.wall.Seconds())), "ops/s (schedules+cancels+fires"+since+")")
}

// quantile of sorted d, nearest rank.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(q*float64(len(d))+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func micros(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e3) }

func mib(n int) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }

// commas formats n with thousands separators: 1000000 -> 1,000,000.
func commas(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// shellQuote quotes path for a POSIX shell where it needs it, so that the
// command printed around it can be pasted.
func shellQuote(path string) string {
	for _, r := range path {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./-+:,@%", r)) {
			return "'" + strings.ReplaceAll(path, "'", `'\''`) + "'"
		}
	}
	return path
}
