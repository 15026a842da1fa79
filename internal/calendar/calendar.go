// Package calendar composes the three tiers into one calendar queue.
//
// With current height H, epoch length L, ring size R and k = R/L - 1, the
// window is w = H/L and:
//
//   - the ring holds the heights of epochs w .. w+k (at most R heights, so
//     no two resident heights share a bucket);
//   - the epoch tier holds epochs w+k+1 .. w+k+C;
//   - the overflow tree holds everything later.
//
// Where a timer lives is a function of its height and the window alone, so a
// timer is in exactly one tier by construction. When the window moves (a new
// epoch begins), epochs move down a tier, and they move while their
// destination holds nothing of their heights: per height, the order of a
// bucket is therefore always insertion order, across every promotion. All
// epoch arithmetic saturates at the last epoch, so heights near 2^64 never
// wrap.
//
// # Spreading the promotions
//
// Moving an epoch into the ring when its window begins, timer by timer,
// would make that one block pay for a whole epoch (and the block's
// end-of-block latency with it). So a window's entry moves whole buckets
// only, and the moves that go timer by timer are made during the window
// before, a share per block:
//
//   - Older timers. When epoch E comes into the ring's range (window
//     E-k), what the epoch tier holds of it moves whole (O(1)) to older
//     bucket E % k. Those timers are older than any the ring takes for
//     their heights from then on, which go straight to the ring buckets.
//     With k = 0 there are no older buckets: the ring's range is the
//     current epoch alone.
//   - Staging, for epoch w+1: L buckets, one per height (h - (w+1)L).
//     Each Advance of window w moves ceil(remaining / blocks left in the
//     window) timers from the front of the epoch's source (its older
//     bucket, or its epoch-tier bucket when k = 0), in FIFO order, to
//     staging. When window w+1 begins, whatever is left is moved and each
//     staging bucket goes in front of the ring bucket of its height whole
//     (O(1): its chunks are relinked and no timer moves), so that block
//     costs O(L), not O(n).
//   - The overflow stage, for epoch w+k+C+1, which goes from the tree to
//     the epoch tier: one bucket, filled with ceil(remaining / blocks left)
//     timers per Advance from the front of the tree (the tree is in (height,
//     seq) order and the epoch is its first range). Its epoch bucket is the
//     one being staged from, hence a separate bucket; when window w+1
//     begins it becomes that epoch bucket whole.
//
// Staging in the window just before the epoch's own, not when it comes
// into the ring's range, writes each staged chunk about L blocks before
// its delivery reads it, not (k+1)L, and the ring's timers of its heights
// are not appended to it: the far timers of a mixed load miss the cache
// less (docs/BENCHMARK_HISTORY.md, session 33).
//
// Older and staged timers still count as the tier TierOf names: TierOf,
// Walk, TierLens and NextAfter see the same as without them, and so
// delivery cannot tell. Per height, insertion order survives: the older
// timers precede the ring's; each stage takes a prefix of its source, so
// a height's staged timers precede its unstaged ones; and an Insert into
// the staged epoch beyond the ring (k = 0) goes behind the unstaged ones
// while any of its height may remain in the source (see Insert).
// Remove tells the places apart in O(1) by seq, because the resident
// timers of a height are in seq order. Beyond the current epoch, a timer
// of the ring's range is in its ring bucket iff the bucket is not empty
// and the timer's seq is at least that of the bucket's first push since
// it was last empty (the ring records it on the push's slow path, see
// Queue.inRing); otherwise it is staged iff its seq is at most the last
// one staged for its height (stageSeq per height of the staged epoch),
// else older. For the overflow stage one (height, seq) bound does, the
// source being sorted.
//
// The share is counted in timers, not heights, so a block moves O(n/L)
// timers even when an epoch's timers share one height. The overflow
// stage's epoch is counted when the window begins by a rank query of the
// tree (Tree.CountTo), O(log^2 n).
package calendar

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/timerlane/timerlane/epoch"
	"github.com/timerlane/timerlane/internal/prefetch"
	"github.com/timerlane/timerlane/internal/radix"
	"github.com/timerlane/timerlane/overflow"
	"github.com/timerlane/timerlane/ring"
)

// Layout is the shape of the tiers. It changes speed and memory only.
type Layout struct {
	RingSize    uint64 // buckets in the ring, a power of two >= 2
	EpochLength uint64 // heights per epoch, 1 .. RingSize
	EpochCount  uint64 // epochs in the epoch tier, >= 1
}

// DefaultLayout suits a node: 4096 blocks in the ring, 8192 epochs of 1024
// (8.4M blocks, beyond CIP-1's default TTL bound of 2,592,000) in the epoch
// tier, so that only timers set further ahead than that pay for the B-tree.
var DefaultLayout = Layout{RingSize: 4096, EpochLength: 1024, EpochCount: 8192}

// Validate reports a layout outside the bounds the tiers accept.
func (l Layout) Validate() error {
	switch {
	case l.RingSize < 2 || l.RingSize&(l.RingSize-1) != 0 || l.RingSize > ring.MaxSize:
		return fmt.Errorf("ring_size %d: must be a power of two in [2, 2^24]", l.RingSize)
	case l.EpochLength < 1 || l.EpochLength > l.RingSize:
		return fmt.Errorf("epoch_length %d: must be in [1, ring_size %d]", l.EpochLength, l.RingSize)
	case l.EpochCount < 1 || l.EpochCount > epoch.MaxCount:
		return fmt.Errorf("epoch_count %d: must be in [1, 2^20]", l.EpochCount)
	}
	return nil
}

// Tier names where a timer lives.
type Tier uint8

// The tiers, nearest first.
const (
	TierRing Tier = iota + 1
	TierEpoch
	TierOverflow
)

// Queue is the three-tier calendar queue over one arena of chunks.
type Queue struct {
	C        *ring.Chunks
	ring     *ring.Ring
	epochs   *epoch.Slabs
	overflow *overflow.Tree
	moved    func(val uint32, p ring.Pos) // told each new position; may be nil
	length   uint64                       // L
	k        uint64                       // whole epochs after the current one that the ring holds
	maxEpoch uint64                       // epoch of height 2^64-1
	cur      uint64                       // current height H
	w        uint64                       // current epoch H/L
	ringEnd  uint64                       // last height the ring holds in window w
	epochEnd uint64                       // last height the epoch tier holds in window w

	// The timers an epoch held before the ring's range reached it, older
	// than any the ring takes for its heights: in older until the window
	// before the epoch's own, staged then into stage, read at each height
	// before its ring bucket (see the package documentation).
	older     ring.Buckets   // k buckets: epoch E's at E % k (k >= 1)
	stage     ring.Buckets   // epoch w+1's staged timers, bucket h - stageLo
	stageSeq  []uint64       // per height of epoch w+1, the bound on its staged seqs (see Remove); 0 when nothing was staged
	stageMax  []uint64       // per height of epoch w+1, the greatest seq pushed into the stage
	stageUsed bool           // some stageSeq may not be 0
	stageLo   uint64         // first height of the staged epoch w+1
	winEnd    uint64         // last height of window w
	shifted   [64]ring.Entry // a batch shifted out of a bucket (stageShare, leave)

	// The overflow stage of epoch w+k+C+1, when there is one (epochEnd <
	// 2^64-1): a prefix of the tree in (height, seq) order, up to (ostH,
	// ostSeq) included ((0, 0) while empty), and inserts that follow it.
	ostage  ring.Buckets // a single bucket
	ostH    uint64
	ostSeq  uint64
	ostEnd  uint64 // last height of epoch w+k+C+1
	ostLeft int    // entries of that epoch still in the tree, tombstones too

	inBulk bool         // between Bulk and Flush
	bulk   []ring.Entry // the bulk load's timers for the tree, not in it yet

	// Tombstones in the tree (see Kill). resident tells a tombstone from
	// a timer (nil: Kill removes at once); dead counts the tombstones in
	// the tree; deadKeys names them, and those dropped since, for purge.
	resident func(val uint32, seq uint64) bool
	dead     int
	deadKeys []ring.Entry

	keys    keySorter    // purge's
	leaving []ring.Entry // Rewind's (leave)
	next    []int        // Rewind's (rebuildWith)
}

// purgeFloor is how many more tombstones than twice its timers the tree
// may hold before Kill purges them: a purge visits every entry, so it
// waits until the tombstones pay for it.
const purgeFloor = 64

// lazyMax is the most timers the tree may hold for Kill to leave
// tombstones. A purge is a pause of the block that makes it, in proportion
// to the tree (BenchmarkPurge); above this bound Kill deletes at once.
const lazyMax = 1 << 14

// New returns an empty queue at height 0. When a timer moves down a tier
// (or into a stage) its new position is reported to moved (if not nil), so
// that its owner can still Remove it.
func New(l Layout, moved func(val uint32, p ring.Pos)) (*Queue, error) {
	return NewIn(l, ring.NewChunks(), moved)
}

// NewIn is New on arena c, whose chunks must all be free (a new arena, or
// one Reset): a queue built anew from another's timers (a rollback's)
// reuses the memory that one's arena holds.
func NewIn(l Layout, c *ring.Chunks, moved func(val uint32, p ring.Pos)) (*Queue, error) {
	if c.Live() != 0 {
		return nil, fmt.Errorf("calendar: an arena with %d chunks in use", c.Live())
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	r, err := ring.New(l.RingSize)
	if err != nil {
		return nil, err
	}
	e, err := epoch.New(l.EpochLength, l.EpochCount)
	if err != nil {
		return nil, err
	}
	k := l.RingSize/l.EpochLength - 1
	q := &Queue{
		C: c, ring: r, epochs: e, overflow: overflow.New(), moved: moved,
		length: l.EpochLength, k: k,
		maxEpoch: math.MaxUint64 / l.EpochLength,
		older:    ring.NewLowBuckets(max(k, 1)),
		stage:    ring.NewBuckets(l.EpochLength),
		stageSeq: make([]uint64, l.EpochLength), stageMax: make([]uint64, l.EpochLength),
		ostage: ring.NewLowBuckets(1),
	}
	q.setWindow(0)
	return q, nil
}

// Reserve makes room in the arena for the chunks of n timers (slab
// memory, mapped now): a bucket's entries fill whole chunks but its last,
// so n timers take at most n/ChunkLen chunks plus one per bucket that
// can hold some (the ring's, the epoch tier's, staging's and the
// overflow stage's; tombstones not yet dropped take room too).
func (q *Queue) Reserve(n int) {
	buckets := q.ring.Size() + q.epochs.Count() + q.length + q.k + 1
	q.C.Reserve(n/ring.ChunkLen + min(n, int(buckets)))
}

// setWindow moves the window to epoch w and caches its bounds, so that
// TierOf, on every insert and cancel, is two comparisons.
func (q *Queue) setWindow(w uint64) {
	q.w = w
	rl, el := q.ringLast(w), q.epochLast(w)
	q.ringEnd, q.epochEnd = q.lastHeight(rl), q.lastHeight(el)
	q.winEnd = q.lastHeight(w)
	if w < q.maxEpoch {
		q.stageLo = (w + 1) * q.length
	}
	if el < q.maxEpoch {
		q.ostEnd = q.lastHeight(el + 1)
	}
}

// staging reports whether window w has a staged epoch, w+1: it has unless
// w is the last epoch.
func (q *Queue) staging() bool { return q.w < q.maxEpoch }

// src is the bucket the staged epoch w+1 is staged from: its older bucket,
// or, when the ring holds only the current epoch (k = 0), its bucket in the
// epoch tier.
func (q *Queue) src() (*ring.Buckets, uint64) {
	if q.k == 0 {
		return &q.epochs.Buckets, q.epochs.Index(q.w + 1)
	}
	return &q.older, (q.w + 1) % q.k
}

// srcEmpty reports whether nothing of the staged epoch is left to stage.
func (q *Queue) srcEmpty() bool {
	if !q.staging() {
		return true
	}
	b, i := q.src()
	return b.At(i).Empty()
}

// inRing reports whether the resident timer (h, seq), h in the ring's
// range, is in its ring bucket. Every timer of the current epoch is (its
// older ones were put in front at the window's entry); of a later epoch,
// the older ones, staged or not, all precede the ring's first of their
// height, and when there are none, every timer is.
func (q *Queue) inRing(h, seq uint64) bool {
	// Whether any older timer exists changes seldom, so its branch is
	// predicted well; h <= winEnd goes either way, and comes second.
	if !q.hasOlder() || h <= q.winEnd {
		return true // no older timer at all, or none of h
	}
	return q.ring.Bucket(h).Live > 0 && seq >= q.ring.First(h)
}

// hasOlder reports whether any older timer is resident, staged or not:
// with none, every timer of the ring's range is in its ring bucket.
func (q *Queue) hasOlder() bool { return q.older.Len()+q.stage.Len() > 0 }

// Height is the current height.
func (q *Queue) Height() uint64 { return q.cur }

// Len is the number of timers in the three tiers.
func (q *Queue) Len() int {
	r, e, o := q.TierLens()
	return r + e + o
}

// TierLens reports how many timers each tier holds; older and staged
// timers count as the tier TierOf names.
func (q *Queue) TierLens() (ringLen, epochLen, overflowLen int) {
	ringLen, epochLen = q.ring.Len()+q.older.Len(), q.epochs.Len()
	if q.k == 0 {
		epochLen += q.stage.Len() // the staged epoch lies beyond the ring
	} else {
		ringLen += q.stage.Len()
	}
	return ringLen, epochLen, q.overflow.Len() - q.dead + len(q.bulk) + q.ostage.Len()
}

func (q *Queue) addEpochs(e, n uint64) uint64 {
	if e > q.maxEpoch-n {
		return q.maxEpoch
	}
	return e + n
}

// lastHeight is the last height of epoch e, saturating at 2^64-1.
func (q *Queue) lastHeight(e uint64) uint64 {
	if e == q.maxEpoch {
		return math.MaxUint64
	}
	return e*q.length + q.length - 1
}

func (q *Queue) ringLast(w uint64) uint64  { return q.addEpochs(w, q.k) }
func (q *Queue) epochLast(w uint64) uint64 { return q.addEpochs(q.ringLast(w), q.epochs.Count()) }

// TierOf is the tier a timer at height h belongs in now.
func (q *Queue) TierOf(h uint64) Tier {
	switch {
	case h <= q.ringEnd:
		return TierRing
	case h <= q.epochEnd:
		return TierEpoch
	}
	return TierOverflow
}

// InsertAddr is where an Insert of height h would write, if that is a
// chunk slot of the ring or the epoch tier with room, else nil: the
// address to prefetch.
func (q *Queue) InsertAddr(h uint64) unsafe.Pointer {
	switch {
	case h <= q.ringEnd:
		return q.ring.Bucket(h).TailAddr(q.C)
	case h <= q.epochEnd && h-q.stageLo >= q.length:
		return q.epochs.Bucket(q.epochs.Of(h)).TailAddr(q.C)
	}
	return nil
}

// Insert enqueues timer e, due at e.Height > Height(), with e.Seq > 0 and
// greater than the Seq of every resident timer of the same height (so the
// resident timers of a height are in seq order). It returns the timer's
// position, which Remove needs (meaningless while the timer is in the
// overflow tree, which finds it by height and seq).
func (q *Queue) Insert(e ring.Entry) ring.Pos {
	h := e.Height
	switch {
	case h <= q.ringEnd:
		return q.ring.Push(q.C, e)
	case h <= q.epochEnd:
		i := h - q.stageLo
		if i >= q.length {
			return q.epochs.Push(q.C, e)
		}
		// The staged epoch, beyond the ring (k = 0).
		if q.srcEmpty() {
			// Nothing of it is left to stage, so nothing of height h.
			return q.stagePush(i, e)
		}
		// Behind the unstaged timers, which it must follow. A staged timer
		// of height h with a seq >= e.Seq can only be one that was removed
		// (e.Seq exceeds every resident's), so lowering the bound keeps
		// Remove's test exact.
		if e.Seq <= q.stageSeq[i] {
			q.stageSeq[i] = e.Seq - 1
		}
		return q.epochs.Push(q.C, e)
	case q.inOstage(h, e.Seq):
		// Below the bound, the tree holds nothing of height h: for h < ostH
		// the stage took all of it; for h = ostH, a timer there would be
		// resident with a seq above ostSeq >= e.Seq. So it goes behind the
		// staged ones, and Remove finds it there by the same test.
		return q.ostage.Push(q.C, 0, e)
	}
	if h <= q.ostEnd {
		q.ostLeft++
	}
	if q.inBulk {
		q.bulk = append(q.bulk, e)
		return 0
	}
	if q.overflow.Insert(e) {
		panic(fmt.Sprintf("calendar: (%d, %d) inserted again after it was killed", h, e.Seq))
	}
	return 0
}

// Bulk starts a bulk load, as a restore makes: until Flush, the inserts
// that go to the overflow tier wait in a list, and Flush adds them to the
// B-tree in (height, seq) order, so that each appends to it instead of
// searching it. Between Bulk and Flush, only Insert may be called.
func (q *Queue) Bulk() { q.inBulk = true }

// Flush ends a bulk load (see Bulk).
func (q *Queue) Flush() {
	q.inBulk = false
	if len(q.bulk) == 0 {
		return
	}
	order, _ := inOrder(q.bulk, nil, nil)
	for _, it := range order {
		q.overflow.Load(q.bulk[it.Pos])
	}
	q.bulk = nil
}

// inOrder returns the positions of es in (height, seq) order (sorted by
// seq, then stably by height), and a buffer: it sorts in items and spare,
// of any length, which it grows as needed.
func inOrder(es []ring.Entry, items, spare []radix.Item) (order, other []radix.Item) {
	items = items[:0]
	for i, e := range es {
		items = append(items, radix.Item{Key: e.Seq, Pos: uint32(i)})
	}
	items, spare = radix.Sort(items, spare, radix.Diff(items))
	for i := range items {
		items[i].Key = es[items[i].Pos].Height
	}
	return radix.Sort(items, spare, radix.Diff(items))
}

// keySorter sorts entries by (height, seq) in buffers it keeps, so that a
// purge allocates only the new tree.
type keySorter struct {
	items, spare  []radix.Item
	entries       []ring.Entry
	words, wspare []uint64
}

// sort sorts es in place by (height, seq), which are unique, without
// keeping their Vals (a purge needs none).
func (k *keySorter) sort(es []ring.Entry) {
	if k.sortPacked(es) {
		return
	}
	k.items, k.spare = inOrder(es, k.items, k.spare)
	k.entries = k.entries[:0]
	for _, it := range k.items {
		k.entries = append(k.entries, es[it.Pos])
	}
	copy(es, k.entries)
}

// sortPacked is sort when each entry fits in 55 bits as (height -
// lowest) above (seq - lowest): one radix pass per 11 bits of 8-byte
// words, where inOrder makes one per varying byte of a 16-byte item, for
// the seq and then for the height. A purge's tombstones, far timers
// cancelled within a stretch of blocks, fit. It reports false, es
// untouched, when they do not.
func (k *keySorter) sortPacked(es []ring.Entry) bool {
	if len(es) == 0 {
		return true
	}
	hlo, hhi, slo, shi := es[0].Height, es[0].Height, es[0].Seq, es[0].Seq
	for _, e := range es[1:] {
		hlo, hhi = min(hlo, e.Height), max(hhi, e.Height)
		slo, shi = min(slo, e.Seq), max(shi, e.Seq)
	}
	sbits := uint(bits.Len64(shi - slo))
	width := uint(bits.Len64(hhi-hlo)) + sbits
	if width > radix.HighDigitBits*radix.MaxHighPasses {
		return false
	}
	k.words = k.words[:0]
	for _, e := range es { // the key's top bit at bit 63 (width 0: all 0)
		k.words = append(k.words, ((e.Height-hlo)<<sbits|(e.Seq-slo))<<(64-width))
	}
	passes := int(width+radix.HighDigitBits-1) / radix.HighDigitBits
	k.words, k.wspare = radix.SortHigh(k.words, k.wspare, passes)
	for i, v := range k.words {
		v >>= 64 - width
		es[i] = ring.Entry{Height: hlo + v>>sbits, Seq: slo + v&(1<<sbits-1)}
	}
	return true
}

// noBulk panics inside a bulk load, where the tree lacks its timers.
func (q *Queue) noBulk() {
	if q.inBulk {
		panic("calendar: a bulk load is not flushed")
	}
}

// inOstage reports whether the overflow-tier timer (h, seq) is in the
// overflow stage: (h, seq) <= (ostH, ostSeq).
func (q *Queue) inOstage(h, seq uint64) bool {
	return h < q.ostH || h == q.ostH && seq <= q.ostSeq
}

// place inserts a timer that moves down a tier and reports its position.
func (q *Queue) place(e ring.Entry) { q.report(e, q.Insert(e)) }

// PrefetchAt starts loading the slot of a timer of height h last reported
// at p, and its bucket, which a Remove will read and write. It is a hint:
// any h and p are harmless.
func (q *Queue) PrefetchAt(h uint64, p ring.Pos) {
	var b, f unsafe.Pointer
	switch {
	case h <= q.ringEnd:
		b = unsafe.Pointer(q.ring.Bucket(h))
		if q.hasOlder() && h > q.winEnd {
			f = q.ring.FirstAddr(h) // inRing reads it only then
		}
	case h <= q.epochEnd:
		b = unsafe.Pointer(q.epochs.Bucket(q.epochs.Of(h)))
	}
	prefetch.Lines(q.C.Addr(p), b, f, nil) // one call: each costs more than its hint
}

// Remove takes the resident timer (height, seq), last reported at p, out
// of its tier.
func (q *Queue) Remove(height, seq uint64, p ring.Pos) {
	q.noBulk()
	if height > q.epochEnd && !q.inOstage(height, seq) {
		if !q.overflow.Delete(height, seq) {
			panic(fmt.Sprintf("calendar: (%d, %d) not in overflow", height, seq))
		}
		q.leftTree(height)
		return
	}
	if s, _ := q.C.At(p); s != seq { // seqs are unique: no other timer is there
		panic(fmt.Sprintf("calendar: remove (%d, %d) at %d finds seq %d", height, seq, p, s))
	}
	switch {
	case height <= q.ringEnd && q.inRing(height, seq):
		q.ring.Kill(q.C, height, p, q.report)
	case height > q.epochEnd:
		q.ostage.Kill(q.C, 0, p, q.report)
	case q.isStaged(height, seq):
		q.stage.Kill(q.C, height-q.stageLo, p, q.report)
	case height <= q.ringEnd:
		q.older.Kill(q.C, q.epochs.Of(height)%q.k, p, q.report)
	default:
		q.epochs.Kill(q.C, height, p, q.report)
	}
}

// isStaged reports whether the resident timer (height, seq), not in the
// ring, is in the stage: in the staged epoch w+1, the timers up to their
// height's bound, and all of them once nothing is left to stage.
func (q *Queue) isStaged(height, seq uint64) bool {
	i := height - q.stageLo
	return q.staging() && i < q.length && (q.srcEmpty() || seq <= q.stageSeq[i])
}

// SetResident lets Kill leave the timers of the overflow tree in it as
// tombstones. resident(val, seq) reports whether the timer (val, seq) of
// the tree is still resident: false once it is killed, whatever the owner
// does with val afterwards. The queue asks only while it holds tombstones,
// and only of timers it is about to move or skip.
func (q *Queue) SetResident(resident func(val uint32, seq uint64) bool) { q.resident = resident }

// Kill takes the resident timer (height, seq), last reported at p, out of
// its tier for good: like Remove, but (height, seq) must never be inserted
// again. A timer of the overflow tree (when SetResident was called) stays
// in the tree as a tombstone, which costs no search of it: a tombstone is
// dropped when its epoch comes into range, or with all the others when
// they outnumber the tree's timers twice over (plus purgeFloor), by one
// ordered pass that builds the tree anew (Tree.Purge). Per tombstone that
// pass costs a fraction of a delete, which searches the tree. While the
// tree holds more than lazyMax timers, Kill deletes at once, so that no
// purge pauses a block for long.
func (q *Queue) Kill(height, seq uint64, p ring.Pos) {
	if q.resident == nil || height <= q.epochEnd || q.inOstage(height, seq) || q.overflow.Len()-q.dead > lazyMax {
		q.Remove(height, seq, p)
		return
	}
	q.noBulk()
	q.dead++
	q.deadKeys = append(q.deadKeys, ring.Entry{Height: height, Seq: seq})
	if len(q.deadKeys) > 2*(q.overflow.Len()-q.dead)+purgeFloor {
		q.purge()
	}
}

// purge takes every tombstone out of the tree. deadKeys names them all,
// with those dropped since they were killed, which the tree no longer
// holds: no timer has their (height, seq), so none is taken by mistake.
func (q *Queue) purge() {
	q.keys.sort(q.deadKeys)
	q.overflow.Purge(q.deadKeys, func(x ring.Entry) {
		q.dead--
		q.leftTree(x.Height)
	})
	if q.dead != 0 {
		panic(fmt.Sprintf("calendar: %d tombstones in the tree that no Kill named", q.dead))
	}
	q.deadKeys = q.deadKeys[:0]
}

// Tombstones is the number of killed timers the overflow tree still holds
// (see Kill): memory, not timers.
func (q *Queue) Tombstones() int { return q.dead }

// isTombstone reports whether x, of the tree, is a tombstone.
func (q *Queue) isTombstone(x ring.Entry) bool { return q.dead > 0 && !q.resident(x.Val, x.Seq) }

// tombstone reports whether x, of the tree, is a tombstone, and if so
// counts it out: the caller drops it from the tree.
func (q *Queue) tombstone(x ring.Entry) bool {
	if !q.isTombstone(x) {
		return false
	}
	q.dead--
	return true
}

// leftTree counts out of the next epoch's count (ostLeft) an entry of
// height h that leaves the tree other than by the overflow stage's share.
func (q *Queue) leftTree(h uint64) {
	if h <= q.ostEnd {
		q.ostLeft--
	}
}

// report tells the owner a timer's new position.
func (q *Queue) report(e ring.Entry, p ring.Pos) {
	if q.moved != nil {
		q.moved(e.Val, p)
	}
}

// Advance moves the current height to h >= Height(). No resident timer may
// be due strictly between the old height and h (NextAfter tells how far that
// holds). When a new epoch begins, the epochs that come into range move down
// a tier; in every block, a share of the next ones moves to the stages.
func (q *Queue) Advance(h uint64) {
	q.noBulk()
	if h < q.cur {
		panic(fmt.Sprintf("calendar: advance from %d back to %d", q.cur, h))
	}
	if h == q.cur {
		return
	}
	q.cur = h
	if w := h / q.length; w != q.w {
		q.enter(w)
	}
	q.stageShare()
}

// enter moves the window to epoch w > q.w and brings the tiers into line
// with it.
func (q *Queue) enter(w uint64) {
	oldW := q.w
	oldRing, oldEpoch := q.ringLast(oldW), q.epochLast(oldW)
	// The staged epoch oldW+1 is staged whole: what is left of its source
	// (only when blocks were skipped) follows its staged timers. After a
	// jump that epoch is past and holds nothing (Advance's contract), and
	// epoch w's older timers, if it has any, are staged now.
	if q.staging() {
		if b, i := q.src(); b.At(i).Live > 0 {
			q.stageAll(b, i, q.stageLo)
		}
	}
	stageLo := q.stageLo
	if q.k > 0 && w > oldW+1 && w <= oldRing {
		if i := w % q.k; q.older.At(i).Live > 0 {
			stageLo = w * q.length
			q.stageAll(&q.older, i, stageLo)
		}
	}
	q.setWindow(w)
	newRing, newEpoch := q.ringLast(w), q.epochLast(w)
	// The staged epoch is the current one now: each stage bucket goes in
	// front of the ring bucket of its height, whole (O(1): chunks are
	// relinked and no timer moves), so that block costs O(L), not O(n).
	if q.stage.Len() > 0 {
		for i := uint64(0); i < q.length; i++ {
			k, ok := q.stage.Next(i, q.length-i)
			if !ok {
				break
			}
			i += k
			// A ring bucket that held nothing takes the stage whole; its
			// first seq is then set above the stage's, so that a rollback
			// across this entry (leave) can take the stage back off it.
			h := stageLo + i
			if q.ring.Bucket(h).Empty() {
				q.ring.SetFirst(h, q.stageMax[i]+1)
			}
			q.stage.PrependTo(q.C, i, &q.ring.Buckets, q.ring.Index(h), q.report)
		}
	}
	q.forgetStage()
	// The epochs that leave the epoch tier for the ring's range: each to
	// its older bucket whole (free: the epoch k before it, which held it, is
	// past or staged), except epoch w after a jump, whose timers go to its
	// ring buckets, which hold none of its heights yet. A jump over an
	// empty tier costs nothing, however many epochs it spans.
	for e := oldRing; e < newRing && e < oldEpoch && q.epochs.Len() > 0; {
		e++ // never past newRing <= maxEpoch, so it cannot wrap
		if e <= w || q.k == 0 {
			q.placeAll(q.epochs.Take(e))
		} else {
			q.epochs.Buckets.MoveTo(q.epochs.Index(e), &q.older, e%q.k)
		}
	}
	if newEpoch == oldEpoch {
		return // saturated: the tree is empty
	}
	// The overflow stage holds the first part of epoch oldEpoch+1. Unless h
	// jumped so far that the epoch is in the ring's range now, it goes
	// whole to the epoch's bucket, free since epoch oldEpoch+1-C left it.
	if q.ostage.Len() > 0 {
		if f := oldEpoch + 1; f > newRing {
			q.ostage.MoveTo(0, &q.epochs.Buckets, q.epochs.Index(f))
		} else {
			q.placeAll(q.ostage.Take(0))
		}
	}
	q.ostH, q.ostSeq = 0, 0
	// The rest of the tree that comes into range, in (height, seq) order.
	for {
		x, ok := q.overflow.Min()
		if !ok || x.Height/q.length > newEpoch {
			break
		}
		q.overflow.PopMin()
		if !q.tombstone(x) {
			q.place(x)
		}
	}
	// Count the next epoch, which the overflow stage takes in this window.
	q.ostLeft = 0
	if newEpoch < q.maxEpoch {
		q.ostLeft = q.overflow.CountTo(q.ostEnd)
	}
}

// forgetStage clears what the stage knew of the staged epoch's seqs, once
// that epoch is staged no more.
func (q *Queue) forgetStage() {
	if q.stageUsed {
		clear(q.stageSeq)
		q.stageUsed = false
	}
	clear(q.stageMax)
}

// stagePush pushes e into stage bucket i, noting its seq.
func (q *Queue) stagePush(i uint64, e ring.Entry) ring.Pos {
	q.stageMax[i] = max(q.stageMax[i], e.Seq)
	return q.stage.Push(q.C, i, e)
}

// stageAll moves every timer of bucket i of b, of the epoch whose first
// height is lo, to the stage, in order.
func (q *Queue) stageAll(b *ring.Buckets, i, lo uint64) {
	it := b.Take(i)
	for x, ok := it.Next(q.C); ok; x, ok = it.Next(q.C) {
		q.report(x, q.stagePush(x.Height-lo, x))
	}
}

// placeAll places every timer of it, in order.
func (q *Queue) placeAll(it ring.Iter) {
	for x, ok := it.Next(q.C); ok; x, ok = it.Next(q.C) {
		q.place(x)
	}
}

// stageShare moves this block's share to each stage: ceil(remaining /
// blocks left in the window, this one included), so that about 1/L of an
// epoch moves per block when every block runs, and nothing is left by the
// window's last block, however many timers there are or arrive meanwhile.
func (q *Queue) stageShare() {
	if !q.staging() {
		return
	}
	left := q.winEnd - q.cur + 1
	b, si := q.src()
	if rem := uint64(b.At(si).Live); rem > 0 {
		q.stageUsed = true
		for n := (rem + left - 1) / left; n > 0; {
			k := b.ShiftTo(q.C, si, q.shifted[:min(n, uint64(len(q.shifted)))])
			if k == 0 {
				panic(fmt.Sprintf("calendar: the staged epoch's bucket counts %d timers and holds none", rem))
			}
			n -= uint64(k)
			for _, x := range q.shifted[:k] {
				i := x.Height - q.stageLo
				q.stageSeq[i] = x.Seq
				q.report(x, q.stagePush(i, x))
			}
		}
	}
	if q.ostLeft > 0 {
		for n := (uint64(q.ostLeft) + left - 1) / left; n > 0; n-- {
			x, _ := q.overflow.PopMin()
			if x.Height > q.ostEnd {
				panic(fmt.Sprintf("calendar: the overflow stage took height %d, past %d", x.Height, q.ostEnd))
			}
			q.ostLeft--
			q.ostH, q.ostSeq = x.Height, x.Seq // a tombstone's bound holds too
			if !q.tombstone(x) {
				q.report(x, q.ostage.Push(q.C, 0, x))
			}
		}
	}
}

// Take detaches the ring bucket of the current height: every timer due now,
// in insertion order. Drain the iterator fully: it gives the bucket's
// chunks back to the arena as it goes.
func (q *Queue) Take() ring.Iter {
	q.noBulk()
	// The next height's bucket was written blocks ago: its first lines
	// load while this one is read.
	q.ring.Bucket(q.cur + 1).PrefetchHead(q.C)
	return q.ring.Take(q.cur)
}

// NextAfter returns the height of the next due timer after Height(), the
// same under every layout; ok is false when nothing is due after it. It
// drops the tombstones it finds at the front of the tree.
func (q *Queue) NextAfter() (h uint64, ok bool) {
	q.noBulk()
	rl, el := q.ringLast(q.w), q.epochLast(q.w)
	if end := q.lastHeight(rl); q.cur < end {
		// The ring's range: its ring buckets, the stage (epoch w+1) and the
		// older buckets of epochs w+1 on, each of one epoch. Heights go up
		// to 2^64-1: found, not a sentinel, says whether h is one.
		h, found := q.ring.NextOccupied(q.cur+1, end)
		low := func(x uint64, ok bool) {
			if ok && (!found || x < h) {
				h, found = x, true
			}
		}
		if q.k > 0 && q.staging() {
			low(q.stageNext())
			if j, ok := q.older.Next((q.w+1)%q.k, rl-q.w); ok {
				// The first epoch with older timers: only its lowest matters.
				if e := q.w + 1 + j; !found || e*q.length <= h {
					bound := uint64(math.MaxUint64)
					if found {
						bound = h
					}
					low(q.older.Lowest(q.C, e%q.k, bound), true)
				}
			}
		}
		if found {
			return h, true
		}
	}
	if rl < el {
		e := rl + 1
		if q.k == 0 {
			// The staged epoch w+1, in the epoch tier: its stage set is in
			// height order, the rest of its bucket is not. Its lowest staged
			// height bounds the lowest unstaged one that matters, which
			// spares a walk of the bucket after staging shifts out the
			// timers of its lowest height (they are staged then).
			h, found := q.stageNext()
			if !found {
				h = math.MaxUint64
			}
			if b, i := q.src(); found || !b.At(i).Empty() {
				return b.Lowest(q.C, i, h), true
			}
			if e == el {
				e = 0 // e+1 may wrap (L = 1 at the top)
			} else {
				e++
			}
		}
		if e != 0 {
			if e, ok := q.epochs.NextOccupied(e, el); ok {
				return q.epochs.MinHeight(q.C, e), true
			}
		}
	}
	// The overflow stage is a prefix of the tier (see Insert).
	if !q.ostage.At(0).Empty() {
		return q.ostage.Lowest(q.C, 0, math.MaxUint64), true
	}
	for {
		x, ok := q.overflow.Min()
		if !ok {
			return 0, false
		}
		if !q.tombstone(x) {
			return x.Height, true
		}
		q.overflow.PopMin()
		q.leftTree(x.Height)
	}
}

// stageNext returns the lowest height in the stage; ok is false when it
// holds none.
func (q *Queue) stageNext() (uint64, bool) {
	k, ok := q.stage.Next(0, q.length)
	return q.stageLo + k, ok
}

// Walk calls f for every resident timer, tier by tier, each in its order,
// and every stage before the rest of its source, so that per height the
// timers come in insertion order. It is for tests and diagnostics, not the
// hot path.
func (q *Queue) Walk(f func(e ring.Entry, t Tier)) {
	q.noBulk()
	q.walk(func(e ring.Entry, t Tier, _ ring.Pos, _ place) { f(e, t) })
}
