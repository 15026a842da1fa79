package engine

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strconv"

	"github.com/zeebo/xxh3"

	"github.com/timerlane/timerlane/internal/bytepool"
	"github.com/timerlane/timerlane/internal/radix"
	"github.com/timerlane/timerlane/merkle"
)

// A snapshot is the whole state between blocks, in the canonical encodings
// of docs/STATE_ROOT.md:
//
//	"TLSNAP" || version[1] = 2
//	|| len(scheduler)[4] || scheduler encoding
//	|| n_timers[8] || n × (timer_id[32] || len[4] || timer encoding), in seq order
//	|| n_fairness[8] || n × (height[8] || actor[20] || fires[8]), oldest first
//	|| root[32] (zero when Config.StateRoot is off)
//	|| image[1] = 1 || the state root's tree image (merkle.WriteImage),
//	   or image[1] = 0 when Config.StateRoot is off
//
// Version 1 is the same without the image. Restore rebuilds an engine from
// it under any tier layout: the layout is not state. The storage layer
// (wal) frames and checksums snapshots; a snapshot decodes strictly, so a
// damaged one is an error, never a wrong state.
//
// The image is what makes a restart fast: rebuilding the tree of a
// million timers costs three million Keccak-256s (value, leaf and internal
// hashes), several seconds, while loading the image hashes nothing.
// Recovery from the engine's own log (Open) trusts it, as it trusts the
// rest of the checksummed file; Restore, whose reader may come from
// anywhere, rebuilds the tree from the leaves and checks the image's root
// against it.

var (
	snapshotMagic   = []byte("TLSNAP\x02")
	snapshotMagicV1 = []byte("TLSNAP\x01")
)

// ErrSnapshot is a snapshot that cannot be restored: damaged, truncated,
// or written under another configuration (then it matches
// ErrConfigMismatch too).
var ErrSnapshot = errors.New("timerlane: bad snapshot")

// WriteSnapshot writes the engine's state to w. It must be called between
// blocks, or after a Close made between blocks.
func (e *Engine) WriteSnapshot(w io.Writer) error {
	if e.phase != phaseIdle && (e.phase != phaseClosed || e.closedInBlock) {
		return e.notIdle()
	}
	if w == nil {
		return errors.New("timerlane: WriteSnapshot to a nil io.Writer")
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	var buf []byte
	buf = append(buf, snapshotMagic...)
	buf = e.appendSchedulerEntry(buf)
	order := e.pendingBySeq()
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(order)))
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	for k, i := range order {
		if k+ahead < len(order) { // in seq order, the records lie at random
			e.prefetchRec(order[k+ahead])
		}
		buf = e.appendTimerEntry(buf[:0], i)
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	var fair []byte
	n := 0
	e.lane.window.Walk(func(h uint64, a uint32, fires uint64) {
		fair = appendFairEntry(fair, h, &e.actors.at(a).addr, fires)
		n++
	})
	buf = binary.BigEndian.AppendUint64(buf[:0], uint64(n))
	buf = append(buf, fair...)
	root := e.Root()
	buf = append(buf, root[:]...)
	buf = append(buf, boolByte(e.root != nil))
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	if e.root != nil {
		if err := e.root.tree.WriteImage(bw); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// appendSchedulerEntry appends len[4] || the scheduler encoding, as
// snapshots and log records hold it.
func (e *Engine) appendSchedulerEntry(b []byte) []byte {
	at := len(b)
	b = e.appendScheduler(binary.BigEndian.AppendUint32(b, 0))
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// appendTimerEntry appends timer_id[32] || len[4] || the timer's encoding,
// as snapshots and log records hold pending timer i.
func (e *Engine) appendTimerEntry(b []byte, i uint32) []byte {
	b = append(b, e.recs.At(i).id[:]...)
	at := len(b)
	b = e.appendTimer(binary.BigEndian.AppendUint32(b, 0), i)
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// pendingBySeq lists the pending timers' records in insertion order, from
// the id index (the queue may be stale: a rollback that cannot run it back
// in place rebuilds it from this).
func (e *Engine) pendingBySeq() []uint32 {
	out := make([]uint32, 0, e.pending)
	e.ids.each(func(s uint64) { out = append(out, uint32(s)) })
	var scratch seqScratch
	e.sortBySeq(out, &scratch)
	return out
}

// seqScratch is sortBySeq's memory, kept by a caller that sorts often.
type seqScratch struct {
	keys, spareKeys []uint64
	items, spare    []radix.Item
}

// sortBySeq puts records recs in the order of their sequences. It is a
// radix sort: comparisons that read the records would miss the cache at
// every step. The records may lie at random (the index's order): their
// loads start takeAhead timers early, so that many misses are under way
// at once.
func (e *Engine) sortBySeq(recs []uint32, s *seqScratch) {
	if len(recs) < 2 {
		return
	}
	keys := slices.Grow(s.keys[:0], len(recs))
	lo, hi := ^uint64(0), uint64(0)
	for k, i := range recs {
		if k+takeAhead < len(recs) {
			e.prefetchRec(recs[k+takeAhead])
		}
		seq := e.recs.At(i).seq
		keys, lo, hi = append(keys, seq), min(lo, seq), max(hi, seq)
	}
	if span := bits.Len64(hi - lo); span <= 32 {
		// The usual case: the sequences span fewer than 2^32, so the offset
		// of each goes above its record in one word, and the sort moves 8
		// bytes a timer in a pass per 11 bits of the span (a million timers:
		// 2 passes, against 3 of 16-byte items).
		for k, i := range recs {
			keys[k] = (keys[k]-lo)<<(64-span) | uint64(i)
		}
		keys, s.spareKeys = radix.SortHigh(keys, s.spareKeys, (span+radix.HighDigitBits-1)/radix.HighDigitBits)
		for k, w := range keys {
			recs[k] = uint32(w)
		}
		s.keys = keys[:0]
		return
	}
	items := slices.Grow(s.items[:0], len(recs))
	for k, i := range recs {
		items = append(items, radix.Item{Key: keys[k], Pos: i})
	}
	items, s.spare = radix.Sort(items, s.spare, radix.Diff(items))
	for k, it := range items {
		recs[k] = it.Pos
	}
	s.keys, s.items = keys[:0], items[:0]
}

// snapReader decodes with bounds checks; the first failure sticks.
type snapReader struct {
	r       *bufio.Reader
	err     error
	at      string
	item    int64 // the item of at being read, or -1
	scratch []byte
}

func (s *snapReader) fail(format string, args ...any) {
	if s.err == nil {
		at := s.at
		if s.item >= 0 {
			at = fmt.Sprintf("%s %d", at, s.item)
		}
		s.err = fmt.Errorf("%w: %s: %s", ErrSnapshot, at, fmt.Sprintf(format, args...))
	}
}

// read is bytes into a buffer of the reader's, valid until the next read:
// a million timers are read without a million allocations.
func (s *snapReader) read(n int) []byte {
	if s.err != nil {
		return nil
	}
	if cap(s.scratch) < n {
		s.scratch = make([]byte, n)
	}
	b := s.scratch[:n]
	if _, err := io.ReadFull(s.r, b); err != nil {
		s.fail("truncated (%v)", err)
		return nil
	}
	return b
}

// bytes is read's bytes in a new buffer, for what outlives the next read.
func (s *snapReader) bytes(n int) []byte { return slices.Clone(s.read(n)) }

func (s *snapReader) u32() uint32 {
	if b := s.read(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (s *snapReader) u64() uint64 {
	if b := s.read(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// Restore builds an engine with configuration cfg from a snapshot. The
// snapshot's configuration (everything in the scheduler leaf but the lane
// figures) must be cfg's; the tier layout may differ. With
// cfg.StateRoot, the state root is rebuilt from the restored state and
// must equal the snapshot's (and its tree image's).
func Restore(cfg Config, r io.Reader) (*Engine, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: a nil io.Reader", ErrSnapshot)
	}
	return restore(cfg, r, false)
}

// restore is Restore; with trustImage, the state root's tree is loaded
// from the snapshot's image instead of rebuilt (recovery from the
// engine's own checksummed log).
func restore(cfg Config, r io.Reader, trustImage bool) (*Engine, error) {
	e, err := New(cfg)
	if err != nil {
		return nil, err
	}
	s := &snapReader{r: bufio.NewReaderSize(r, 1<<16), at: "header", item: -1}
	version := 2
	switch m := s.read(len(snapshotMagic)); {
	case s.err != nil:
	case string(m) == string(snapshotMagicV1):
		version = 1
	case string(m) != string(snapshotMagic):
		s.fail("not a timerlane snapshot of version 1 or 2")
	}
	// With an image to load, the tree is not built as the state is.
	rebuilt := e.root
	if trustImage && version == 2 {
		e.root = nil
	}
	s.at = "scheduler"
	n := s.u32()
	if s.err == nil && n > 1<<20 {
		s.fail("length %d", n)
	}
	sched := s.bytes(int(n))
	if s.err != nil {
		return nil, s.err
	}
	if err := e.restoreScheduler(sched); err != nil {
		if cm := (*configMismatch)(nil); errors.As(err, &cm) {
			return nil, fmt.Errorf("%w: scheduler: %w", ErrSnapshot, cm)
		}
		// Not %w: the lane parameters' ErrInvalidConfig, say, is the
		// snapshot's damage, not the caller's configuration.
		return nil, fmt.Errorf("%w: scheduler: %v", ErrSnapshot, err)
	}
	e.q.Advance(e.height)

	s.at = "timers"
	count := s.u64()
	if s.err == nil {
		e.ids.presplit(int(min(count, 1<<22)), segHalf) // a damaged count must not allocate much
	}
	lastSeq := uint64(0)
	s.at = "timer"
	e.startBulk(int(min(count, 1<<22)))
	for k := uint64(0); k < count && s.err == nil; k++ {
		s.item = int64(k)
		var id TimerID
		copy(id[:], s.read(32))
		n := s.u32()
		if s.err == nil && n > 64+2*bytepool.MaxLen {
			s.fail("length %d", n)
		}
		enc := s.read(int(n)) // decoded, then copied by restoreTimer
		if s.err != nil {
			break
		}
		t, err := e.decodeTimer(enc)
		if err == nil && t.seq <= lastSeq {
			err = fmt.Errorf("seq %d after %d: not in insertion order", t.seq, lastSeq)
		}
		if err == nil {
			_, err = e.restoreTimer(id, &t)
		}
		if err != nil {
			s.fail("%v", err)
			break
		}
		lastSeq = t.seq
	}
	s.item = -1
	if err := e.finishBulk(); err != nil && s.err == nil {
		s.fail("%v", err)
	}
	if s.err == nil && lastSeq >= e.seq {
		s.at = "timers"
		s.fail("seq %d is not below the next seq %d", lastSeq, e.seq)
	}

	s.at = "fairness"
	count = s.u64()
	if s.err == nil && count > 0 && cfg.Policy != PolicyLane {
		s.fail("fairness entries under policy fifo")
	}
	lastH := uint64(0)
	seen := map[Address]bool{} // the actors of height lastH
	for k := uint64(0); k < count && s.err == nil; k++ {
		x := s.read(fairEntryLen)
		if s.err != nil {
			break
		}
		h, addr, fires := readFairEntry(x)
		if h != lastH {
			clear(seen)
		}
		switch {
		case h < lastH:
			s.fail("entry %d at height %d after height %d", k, h, lastH)
		case h > e.height || seen[addr]:
			s.fail("entry %d: height %d, actor %s", k, h, addr)
		default:
			if err := e.addFiresOf(h, &addr, fires); err != nil {
				s.fail("entry %d: %v", k, err)
			}
			lastH, seen[addr] = h, true
		}
	}
	s.at = "root"
	root := s.bytes(32)
	var image *merkle.Tree
	if version == 2 {
		s.at = "tree image"
		switch flag := s.read(1); {
		case s.err != nil:
		case flag[0] == 1:
			t, err := merkle.ReadImage(s.r)
			if err != nil {
				s.fail("%v", err)
			}
			image = t
		case flag[0] != 0:
			s.fail("flag %d", flag[0])
		}
	}
	if s.err == nil {
		if _, err := s.r.ReadByte(); err != io.EOF {
			s.fail("bytes after the end")
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	if !cfg.StateRoot {
		return e, nil
	}
	if e.root == nil { // the image's tree, if the snapshot has one
		e.root = rebuilt
		if image != nil {
			e.root.tree = image
		} else {
			e.rebuildTree()
		}
	}
	want := e.pending + e.lane.window.Entries() + 1 // and the scheduler
	got := e.Root()
	stored := string(root) != string(make([]byte, 32)) // zero: written without a root
	switch {
	case e.root.tree.Len() != want:
		return nil, fmt.Errorf("%w: the tree image has %d leaves, the state %d", ErrSnapshot, e.root.tree.Len(), want)
	case stored && string(got[:]) != string(root):
		return nil, fmt.Errorf("%w: the restored state's root %x is not the snapshot's %x", ErrSnapshot, got, root)
	case image != nil && e.root.tree != image && imageSum(image) != imageSum(e.root.tree):
		return nil, fmt.Errorf("%w: the tree image is not the restored state's tree", ErrSnapshot)
	}
	if stored {
		e.checked++
	}
	return e, nil
}

// imageSum is a checksum of a tree's image: two trees with the same sum
// cache the same hashes.
func imageSum(t *merkle.Tree) uint64 {
	h := xxh3.New()
	t.WriteImage(h)
	return h.Sum64()
}

// decodedTimer is a timer read from its canonical encoding.
type decodedTimer struct {
	actor         Address
	height, seq   uint64
	handler, body []byte
	fees          Fees
}

// decodeTimer reads appendTimer's encoding, strictly.
func (e *Engine) decodeTimer(b []byte) (decodedTimer, error) {
	var t decodedTimer
	take := func(n int) ([]byte, bool) {
		if len(b) < n {
			return nil, false
		}
		x := b[:n]
		b = b[n:]
		return x, true
	}
	short := errors.New("timer encoding truncated")
	if x, ok := take(1 + 20 + 8 + 8 + 4); !ok || x[0] != tagTimer {
		return t, errors.New("not a timer encoding")
	} else {
		t.actor = Address(x[1:21])
		t.height = binary.BigEndian.Uint64(x[21:29])
		t.seq = binary.BigEndian.Uint64(x[29:37])
		hl := binary.BigEndian.Uint32(x[37:41])
		if hl > e.cfg.MaxHandlerBytes {
			return t, fmt.Errorf("handler of %d bytes", hl)
		}
		if t.handler, ok = take(int(hl)); !ok {
			return t, short
		}
	}
	x, ok := take(4)
	if !ok {
		return t, short
	}
	pl := binary.BigEndian.Uint32(x)
	if pl > e.cfg.MaxPayloadBytes {
		return t, fmt.Errorf("payload of %d bytes", pl)
	}
	if t.body, ok = take(int(pl)); !ok {
		return t, short
	}
	x, ok = take(1)
	if !ok {
		return t, short
	}
	set := FeeField(x[0])
	if set&^(HasFeePayer|HasGasLimit|HasExpiresAt|HasMaxFee|HasMaxPriorityFee|HasTier) != 0 {
		return t, fmt.Errorf("fee fields %#x", x[0])
	}
	f := &t.fees
	f.Set = set
	for _, field := range []struct {
		bit FeeField
		n   int
		set func([]byte)
	}{
		{HasFeePayer, 20, func(x []byte) { f.FeePayer = Address(x) }},
		{HasGasLimit, 8, func(x []byte) { f.GasLimit = binary.BigEndian.Uint64(x) }},
		{HasExpiresAt, 8, func(x []byte) { f.ExpiresAt = binary.BigEndian.Uint64(x) }},
		{HasMaxFee, 16, func(x []byte) { f.MaxFee = amountBE(x) }},
		{HasMaxPriorityFee, 16, func(x []byte) { f.MaxPriorityFee = amountBE(x) }},
		{HasTier, 1, func(x []byte) { f.Tier = PriorityTier(x[0]) }},
	} {
		if set&field.bit == 0 {
			continue
		}
		x, ok := take(field.n)
		if !ok {
			return t, short
		}
		field.set(x)
	}
	if set&HasTier != 0 && f.Tier > Urgent {
		return t, fmt.Errorf("priority tier %d", f.Tier)
	}
	if set != 0 && e.cfg.Policy != PolicyLane {
		return t, errors.New("fee fields under policy fifo")
	}
	if len(b) != 0 {
		return t, fmt.Errorf("%d bytes after the timer", len(b))
	}
	return t, nil
}

func amountBE(x []byte) Amount {
	return Amount{Hi: binary.BigEndian.Uint64(x[:8]), Lo: binary.BigEndian.Uint64(x[8:16])}
}

// startBulk starts a bulk load of about n timers by restoreTimer: their
// records go into the id index, and far ones into the calendar queue's
// B-tree, all at once at finishBulk, in an order that walks memory in
// sequence.
func (e *Engine) startBulk(n int) {
	e.bulk = make([]uint32, 0, n)
	e.q.Bulk()
}

// finishBulk ends a bulk load; it fails if a timer id came twice.
func (e *Engine) finishBulk() error {
	e.q.Flush()
	recs := e.bulk
	e.bulk = nil
	if dup := e.ids.putAll(recs); dup != nil {
		return fmt.Errorf("timer %s twice", *dup)
	}
	return nil
}

// restoreTimer makes t pending as timer id, in its tier or, when its
// height has passed (a lane timer waiting), on the deferred list.
func (e *Engine) restoreTimer(id TimerID, t *decodedTimer) (uint32, error) {
	var at slot
	if e.bulk == nil { // in a bulk load, finishBulk finds the duplicates
		var dup bool
		if at, _, dup = e.ids.lookup(&id); dup {
			return 0, fmt.Errorf("timer %s twice", id)
		}
	}
	return e.restoreTimerAt(at, id, t)
}

// restoreTimerAt is restoreTimer with the index slot of id from a lookup
// that found nothing, the index unchanged since.
func (e *Engine) restoreTimerAt(at slot, id TimerID, t *decodedTimer) (uint32, error) {
	if t.height <= e.height && e.cfg.Policy != PolicyLane {
		return 0, fmt.Errorf("timer %s at height %d is not after the current height %d", id, t.height, e.height)
	}
	if t.height == 0 {
		return 0, fmt.Errorf("timer %s at height 0", id)
	}
	ai, pending := e.actors.lookup(&t.actor)
	if pending >= e.cfg.MaxTimersPerActor && e.cfg.Policy != PolicyLane {
		// Under the lane an actor may hold more: its timers left waiting
		// come back after its handlers scheduled in their absence
		// (docs/SPEC.md §12.5).
		return 0, fmt.Errorf("actor %s has more than max_timers_per_actor timers", t.actor)
	}
	var fee uint32
	if t.fees.Set != 0 {
		fee = e.allocFee()
		*e.lane.fees.At(fee) = t.fees
	}
	i := e.addTimer(at, &id, t.height, t.seq, t.handler, t.body, fee, ai, &t.actor)
	e.place(i, e.recs.At(i))
	return i, nil
}

// schedulerHead is the length of a scheduler encoding's state before its
// configuration (appendScheduler): tag, height 8, started 1, seq 8.
const schedulerHead = 1 + 8 + 1 + 8

// configFields are the configuration's part of the scheduler encoding,
// after schedulerHead, in order (appendScheduler), with their widths:
// then come the system deployers, 20 bytes each.
var configFields = []struct {
	name string
	size int
}{
	{"MaxTimersPerActor", 4}, {"MaxPayloadBytes", 4}, {"MaxHandlerBytes", 4},
	{"CyclesPerFire", 8}, {"CellsPerFire", 8}, {"ScheduleCycles", 8}, {"CancelCycles", 8},
	{"Policy", 1}, {"ActivationHeight", 8}, {"InitialBasefee", 16}, {"len(SystemDeployers)", 4},
}

var errTruncatedScheduler = errors.New("truncated or not a scheduler encoding")

// configMismatch is ErrConfigMismatch with the first field that differs.
type configMismatch struct{ field, theirs, ours string }

func (c *configMismatch) Error() string {
	return fmt.Sprintf("written under another configuration: its %s is %s, the engine's %s", c.field, c.theirs, c.ours)
}

func (*configMismatch) Is(target error) bool { return target == ErrConfigMismatch }

// checkConfig checks that scheduler encoding b was written under the
// engine's configuration, naming the first field that differs, and
// returns where the state after the configuration begins in b.
func (e *Engine) checkConfig(b []byte) (int, error) {
	ours := e.appendScheduler(nil) // its configuration part does not depend on the state
	if len(b) < schedulerHead || b[0] != tagScheduler {
		return 0, errTruncatedScheduler
	}
	value := func(x []byte) string {
		switch len(x) {
		case 1:
			if p := Policy(x[0]); p == PolicyFIFO || p == PolicyLane {
				return p.String()
			}
			return fmt.Sprintf("policy %d", x[0])
		case 4:
			return strconv.FormatUint(uint64(binary.BigEndian.Uint32(x)), 10)
		case 8:
			return strconv.FormatUint(binary.BigEndian.Uint64(x), 10)
		case 16:
			return amountBE(x).String()
		}
		return "0x" + hex.EncodeToString(x)
	}
	off := schedulerHead
	field := func(name string, size int) error {
		if len(b) < off+size {
			return errTruncatedScheduler
		}
		if x, y := b[off:off+size], ours[off:off+size]; string(x) != string(y) {
			return &configMismatch{name, value(x), value(y)}
		}
		off += size
		return nil
	}
	for _, f := range configFields {
		if err := field(f.name, f.size); err != nil {
			return 0, err
		}
	}
	for k := range e.cfg.SystemDeployers { // as many in b: their count is equal
		if err := field(fmt.Sprintf("SystemDeployers[%d]", k), len(Address{})); err != nil {
			return 0, err
		}
	}
	return off, nil
}

// restoreScheduler sets the scheduler state from its encoding, after
// checking that its configuration is the engine's.
func (e *Engine) restoreScheduler(b []byte) error {
	cfgEnd, err := e.checkConfig(b)
	if err != nil {
		return err
	}
	e.height = binary.BigEndian.Uint64(b[1:9])
	switch b[9] {
	case 0:
		e.started = false
	case 1:
		e.started = true
	default:
		return fmt.Errorf("started byte %d", b[9])
	}
	e.seq = binary.BigEndian.Uint64(b[10:18])
	if e.seq == 0 || (e.height == 0) == e.started {
		return fmt.Errorf("height %d, started %v, next seq %d", e.height, e.started, e.seq)
	}
	rest := b[cfgEnd:]
	s := &e.lane
	if len(rest) < 1+16+16+8 || rest[0] > 1 {
		return errors.New("lane figures truncated")
	}
	if (rest[0] == 1) != e.laneStarted() {
		return fmt.Errorf("lane started byte %d at height %d", rest[0], e.height)
	}
	s.basefee, s.p50 = amountBE(rest[1:17]), amountBE(rest[17:33])
	s.lastCycles = binary.BigEndian.Uint64(rest[33:41])
	rest = rest[41:]
	p, rest, err := decodeParams(rest)
	if err != nil {
		return err
	}
	s.params = p
	s.window.SetBlocks(max(1, p.FairnessWindowBlocks))
	if len(rest) < 1 || rest[0] > 1 {
		return errors.New("update flag truncated")
	}
	if rest[0] == 1 {
		u, tail, err := decodeParams(rest[1:])
		if err != nil {
			return err
		}
		s.update, rest = &u, tail
	} else {
		// A rollback restores into a live engine: an update made in a
		// block it undoes must go too.
		s.update, rest = nil, rest[1:]
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d bytes after the scheduler state", len(rest))
	}
	if e.cfg.Policy == PolicyLane {
		if err := s.params.Validate(); err != nil {
			return err
		}
	}
	return nil
}

const paramsLen = 7*8 + 16 + 4*8

func decodeParams(b []byte) (LaneParams, []byte, error) {
	var p LaneParams
	if len(b) < paramsLen {
		return p, nil, errors.New("lane parameters truncated")
	}
	v := func(k int) uint64 { return binary.BigEndian.Uint64(b[8*k:]) }
	p.LaneTimerCycles, p.GCCycles, p.GCCostPerTimer, p.MaxCyclesPerFireAuction = v(0), v(1), v(2), v(3)
	p.FairnessWindowBlocks, p.MaxTTLBlocks, p.BidDeprecationBlocks = v(4), v(5), v(6)
	p.MinBasefee = amountBE(b[56:72])
	for t := range p.TierMultipliers {
		p.TierMultipliers[t] = binary.BigEndian.Uint64(b[72+8*t:])
	}
	return p, b[paramsLen:], nil
}
