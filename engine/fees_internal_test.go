package engine

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/internal/u128"
)

func amt(s string) Amount {
	a, err := ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

const max128 = "340282366920938463463374607431768211455"

func TestNextBasefee(t *testing.T) {
	p := DefaultLaneParams() // lane 2,000,000: target 1,000,000
	tests := []struct {
		name string
		b    string
		used uint64
		want string
	}{
		{"full lane: +12.5%", "1000", 2_000_000, "1125"},
		{"empty lane: -12.5%", "1000", 0, "875"},
		{"at target: unchanged", "1000", 1_000_000, "1000"},
		{"75%: clipped at +12.5%", "1000", 1_500_000, "1125"},
		{"56.25%: exactly +12.5%", "1000", 1_125_000, "1125"},
		{"53.125%: +6.25%", "1000", 1_062_500, "1062"},
		{"46.875%: -6.25%, rounded toward less change", "1000", 937_500, "938"},
		{"25%: clipped at -12.5%", "1000", 500_000, "875"},
		{"a small basefee still rises by 1", "7", 2_000_000, "8"},
		{"zero rises", "0", 2_000_000, "1"},
		{"floor holds", "1", 0, "1"},
		{"saturates at 2^128-1", max128, 2_000_000, max128},
		{"large values are exact", "340282366920938463463374607431768211448", 0, "297747071055821155530452781502797185017"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, nextBasefee(amt(tc.b), tc.used, p.LaneTimerCycles, p.MinBasefee).String())
		})
	}
	require.Equal(t, "900", nextBasefee(amt("1000"), 0, p.LaneTimerCycles, amt("900")).String(), "the floor")

	// An odd lane: the target is L/2 exactly, not rounded down. L = 101,
	// 51 used: (51/101 - 1/2)/(1/2) = +1/101, so 10100 -> 10200; 50 used:
	// -1/101, so 10302 -> 10200.
	odd := DefaultLaneParams()
	odd.LaneTimerCycles = 101
	require.Equal(t, "10200", nextBasefee(amt("10100"), 51, odd.LaneTimerCycles, odd.MinBasefee).String(), "just above half of an odd lane")
	require.Equal(t, "10200", nextBasefee(amt("10302"), 50, odd.LaneTimerCycles, odd.MinBasefee).String(), "just below half of an odd lane")
	require.Equal(t, "11362", nextBasefee(amt("10100"), 101, odd.LaneTimerCycles, odd.MinBasefee).String(), "a full odd lane: +1/8")
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{nil, "0"},
		{[]string{"5"}, "5"},
		{[]string{"9", "1", "5"}, "5"},
		{[]string{"4", "1"}, "2"}, // 2.5 rounded down
		{[]string{"3", "1", "4", "1"}, "2"},
		{[]string{"3", "5"}, "4"},
		{[]string{max128, max128}, max128},
		{[]string{max128, "340282366920938463463374607431768211453"}, "340282366920938463463374607431768211454"},
	}
	for _, tc := range tests {
		xs := make([]Amount, len(tc.in))
		for i, s := range tc.in {
			xs[i] = amt(s)
		}
		require.Equal(t, tc.want, median(xs).String(), "%v", tc.in)
	}
}

// TestMedianSelect checks the quickselect's median against a sort's, on
// inputs that defeat naive pivots: sorted, reversed, organ pipe, few
// distinct values, all equal, and values above 2^64.
func TestMedianSelect(t *testing.T) {
	r := newRand(11)
	for _, n := range []int{1, 2, 3, 16, 17, 18, 100, 101, 1000, 10001} {
		for shape := range 6 {
			xs := make([]Amount, n)
			for i := range xs {
				switch shape {
				case 0:
					xs[i] = Amount{Lo: r()}
				case 1:
					xs[i] = Amount{Lo: uint64(i)}
				case 2:
					xs[i] = Amount{Lo: uint64(n - i)}
				case 3:
					xs[i] = Amount{Lo: uint64(min(i, n-i))}
				case 4:
					xs[i] = Amount{Lo: r() % 3}
				case 5:
					xs[i] = Amount{Hi: r() % 2, Lo: r() % 5}
				}
			}
			sorted := slices.Clone(xs)
			slices.SortFunc(sorted, Amount.Cmp)
			want := sorted[n/2]
			if n%2 == 0 {
				a, b := sorted[n/2-1], sorted[n/2]
				want = a.Rsh(1).Add(b.Rsh(1))
				if a.Lo&1 == 1 && b.Lo&1 == 1 {
					want = want.Add64(1)
				}
			}
			require.Equal(t, want, median(slices.Clone(xs)), "n=%d shape=%d", n, shape)
			for _, k := range []int{0, n / 3, n - 1} {
				ys := slices.Clone(xs)
				selectAmount(ys, k)
				require.Equal(t, sorted[k], ys[k], "select %d of %d, shape %d", k, n, shape)
				for i := range ys {
					c := ys[i].Cmp(ys[k])
					require.False(t, i < k && c > 0 || i > k && c < 0, "select %d of %d, shape %d: %d out of place", k, n, shape, i)
				}
			}
		}
	}
}

// TestArithmetic checks the checked and wide helpers against math/big.
func TestArithmetic(t *testing.T) {
	vals := []string{"0", "1", "7", "18446744073709551615", "18446744073709551616", "123456789012345678901234567890", max128}
	ns := []uint64{0, 1, 3, 1000, 1 << 32, ^uint64(0)}
	lim := new(big.Int).Lsh(big.NewInt(1), 128)
	for _, v := range vals {
		a := amt(v)
		for _, n := range ns {
			want := new(big.Int).Mul(a.Big(), new(big.Int).SetUint64(n))
			got, ok := u128.Mul64(a, n)
			require.Equal(t, want.Cmp(lim) < 0, ok, "%s × %d", v, n)
			if ok {
				require.Equal(t, want.String(), got.String())
			}
			w := mulWide(a, n)
			wb := new(big.Int).SetUint64(w.hi)
			wb.Lsh(wb, 64).Add(wb, new(big.Int).SetUint64(w.mid))
			wb.Lsh(wb, 64).Add(wb, new(big.Int).SetUint64(w.lo))
			require.Equal(t, want.String(), wb.String(), "wide %s × %d", v, n)
			if n > 0 {
				for _, num := range ns {
					q := new(big.Int).Mul(a.Big(), new(big.Int).SetUint64(num))
					q.Div(q, new(big.Int).SetUint64(n))
					got, ok := u128.MulDiv64(a, num, n)
					require.Equal(t, q.Cmp(lim) < 0, ok, "%s × %d / %d", v, num, n)
					if ok {
						require.Equal(t, q.String(), got.String(), "%s × %d / %d", v, num, n)
					}
				}
			}
		}
		for _, v2 := range vals {
			b := amt(v2)
			sum := new(big.Int).Add(a.Big(), b.Big())
			got, ok := u128.Add(a, b)
			require.Equal(t, sum.Cmp(lim) < 0, ok)
			if ok {
				require.Equal(t, sum.String(), got.String())
			}
		}
	}
	for _, v := range vals {
		a := amt(v)
		for _, w := range []uint64{0, 1, 1_000_000, 2_000_000, ^uint64(0)} {
			got := mulWide(a, w)
			g := new(big.Int).SetUint64(got.hi)
			g.Lsh(g, 64).Add(g, new(big.Int).SetUint64(got.mid))
			g.Lsh(g, 64).Add(g, new(big.Int).SetUint64(got.lo))
			want := new(big.Int).Mul(a.Big(), new(big.Int).SetUint64(w))
			require.Equal(t, want.String(), g.String(), "%s × %d", v, w)
		}
	}
}

func TestParseAmount(t *testing.T) {
	for _, bad := range []string{"", "-1", "1.5", "0x10", " 1", "340282366920938463463374607431768211456", "1e3", "99999999999999999999999999999999999999999"} {
		_, err := ParseAmount(bad)
		require.Error(t, err, "%q", bad)
	}
	for _, good := range []string{"0", "007", max128} {
		_, err := ParseAmount(good)
		require.NoError(t, err, "%q", good)
	}
}

// TestHeapKeys checks that the radix sort (its runs sorted again when
// long), and popping the specialised heap (also after a prune), yield the
// order of the standard sort, with many ties at every
// level of the key, and with keys that differ in every byte.
func TestHeapKeys(t *testing.T) {
	var sorter keySorter
	gases := []uint64{0, 7, maxGas32 - 1, 1 << 40} // the last stands in the key as maxGas32
	for _, n := range []int{0, 1, 2, 3, 15, 16, 17, 31, 32, 33, 100, 1000, 5000} {
		for seed := uint64(0); seed < 12; seed++ {
			r := newRand(seed)
			x := make([]sortKey, n)
			ids := make([]uint64, n) // a second id word for full ties
			for i := range x {
				eff, id0 := wide{hi: r() % 2, mid: r() % 3, lo: r() % 4}, r()%5
				switch seed {
				case 5: // every byte varies
					eff, id0 = wide{hi: r(), mid: r(), lo: r()}, r()
				case 6: // all keys equal: only the tie orders them
					eff, id0 = wide{lo: 7}, 9
				case 7: // only the id prefix varies, in its low bits
					eff, id0 = wide{lo: 7}, r()%1000
				case 8: // priorities in the low word, as a block's are
					eff, id0 = wide{lo: r() % 13 * (1_000_000 + r()%1_000_000)}, r()
				case 9: // few distinct priorities, ids that agree in their top bits
					eff, id0 = wide{lo: r() % 3}, r()%64
				case 10, 11: // a whale: one priority far above the rest, which
					// agree on every bit the first radix sort takes
					eff, id0 = wide{lo: r() % 13 * (1_000_000 + r()%1_000_000)}, r()
					if seed == 11 {
						eff, id0 = wide{lo: r() % 3}, r()%4096
					}
					if i == 0 {
						eff.hi = 1
					}
				}
				x[i] = newSortKey(eff, id0, uint32(i), gases[r()%4])
				ids[i] = r() % 3
			}
			tie := func(a, b uint32) bool { return ids[a] < ids[b] || ids[a] == ids[b] && a < b }
			want := slices.Clone(x)
			slices.SortFunc(want, func(a, b sortKey) int { return a.compare(&b, tie) })
			sorted := []sortKey{}
			for _, p := range sorter.sort(x, tie) {
				sorted = append(sorted, x[p])
			}
			require.Equal(t, want, sorted, "sort: n=%d seed=%d", n, seed)
			heapKeys(x, tie)
			got := make([]sortKey, 0, n)
			for m := len(x); m > 0; {
				got = append(got, x[0])
				m--
				x[0] = x[m]
				siftKeys(x[:m], 0, tie)
			}
			require.Equal(t, want, got, "n=%d seed=%d", n, seed)
			// Pruned half way, the heap pops those left that fit, in order.
			cands := make([]cand, n)
			for i := range cands {
				cands[i].gas = []uint64{0, 7, maxGas32 - 1, 1 << 40}[i%4]
				x[i] = newSortKey(wide{lo: uint64(i % 5)}, uint64(i), uint32(i), cands[i].gas)
			}
			want = slices.Clone(x)
			slices.SortFunc(want, func(a, b sortKey) int { return a.compare(&b, tie) })
			heapKeys(x, tie)
			got = got[:0]
			m := len(x)
			for ; m > n/2; m-- {
				got = append(got, x[0])
				x[0] = x[m-1]
				siftKeys(x[:m-1], 0, tie)
			}
			room := []uint64{0, 7, maxGas32 - 1, maxGas32, 1 << 40}[seed%5]
			m = pruneKeys(x[:m], cands, room)
			heapKeys(x[:m], tie)
			for ; m > 0; m-- {
				got = append(got, x[0])
				x[0] = x[m-1]
				siftKeys(x[:m-1], 0, tie)
			}
			kept := want[: n-n/2 : n-n/2]
			for _, key := range want[n-n/2:] {
				if cands[key.k].gas <= room {
					kept = append(kept, key)
				}
			}
			require.Equal(t, kept, got, "pruned: n=%d seed=%d room=%d", n, seed, room)
		}
	}
}

func newRand(seed uint64) func() uint64 {
	s := seed*0x9e3779b97f4a7c15 + 1
	return func() uint64 {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		return s
	}
}

// openAtBlock1 returns an engine of cfg in block 1 and a transaction of
// actor open in it.
func openAtBlock1(t *testing.T, cfg Config, actor Address) (*Engine, Tx) {
	t.Helper()
	e, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, e.BeginBlock(1))
	tx, err := e.Begin(actor, 1)
	require.NoError(t, err)
	return e, tx
}

// TestExtendTakesCleanFeeEntry: a fee entry freed by one timer and taken
// by the extend of a timer that stated no fees holds only the new expiry,
// none of the fields its last owner stated.
func TestExtendTakesCleanFeeEntry(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Policy, cfg.RollbackDepth = PolicyLane, 0 // records freed at once
	actor := Address{1}
	e, tx := openAtBlock1(t, cfg, actor)
	a, err := tx.ScheduleFees(10, []byte("a"), &Fees{Set: HasGasLimit | HasFeePayer | HasTier, GasLimit: 100, FeePayer: Address{9}, Tier: Urgent})
	require.NoError(t, err)
	_, err = tx.Cancel(a.ID)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	require.Len(t, freeFees(e), 1, "the cancelled timer's fee entry is free")

	tx, err = e.Begin(actor, 2)
	require.NoError(t, err)
	b, _, err := tx.Schedule(10, []byte("b"))
	require.NoError(t, err)
	exp := 10 + cfg.Lane.MaxTTLBlocks // the only expiry above the default's
	_, err = tx.Extend(b, exp)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	i, ok := e.ids.get(&b)
	require.True(t, ok)
	require.Equal(t, Fees{Set: HasExpiresAt, ExpiresAt: exp}, *e.feeOf(e.recs.At(i)))
}

// TestRevertedExtendFreesItsFeeEntry: the extend of a timer that stated
// no fees takes a fee entry; reverting it gives the entry back and leaves
// the timer with no stated fees, root included, so that the same extend
// is valid again.
func TestRevertedExtendFreesItsFeeEntry(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Policy, cfg.StateRoot = PolicyLane, true
	actor := Address{1}
	e, tx := openAtBlock1(t, cfg, actor)
	id, _, err := tx.Schedule(10, []byte("a"))
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	root := e.Root()

	exp := 10 + cfg.Lane.MaxTTLBlocks // the only expiry a default timer may extend to
	for _, revert := range []bool{true, false} {
		tx, err = e.Begin(actor, 2)
		require.NoError(t, err)
		_, err = tx.Extend(id, exp)
		require.NoError(t, err)
		i, ok := e.ids.get(&id)
		require.True(t, ok)
		require.Equal(t, Fees{Set: HasExpiresAt, ExpiresAt: exp}, *e.feeOf(e.recs.At(i)))
		if !revert {
			require.NoError(t, tx.Commit())
			require.NotEqual(t, root, e.Root(), "a committed extend changes the root")
			break
		}
		entry := e.recs.At(i).fee
		require.NoError(t, tx.Revert())
		require.Nil(t, e.feeOf(e.recs.At(i)), "the reverted extend's fee entry")
		require.Contains(t, freeFees(e), entry, "the entry is free again")
		require.Equal(t, root, e.Root())
	}
}

// freeFees lists the free fee entries, leaving the stack as it was.
func freeFees(e *Engine) []uint32 {
	var out []uint32
	for i, ok := e.lane.feeFree.Pop(); ok; i, ok = e.lane.feeFree.Pop() {
		out = append(out, i)
	}
	for _, i := range slices.Backward(out) {
		e.lane.feeFree.Push(i)
	}
	return out
}

// BenchmarkKeySort: one op sorts 100,000 lane keys of small priorities
// (tips of 0 to 12 times a W near a million); whale gives one of them a
// priority far above the rest, which then agree on every bit the first
// radix pass takes and go through sortRun again.
func BenchmarkKeySort(b *testing.B) {
	for _, whale := range []bool{false, true} {
		b.Run(fmt.Sprintf("whale=%v", whale), func(b *testing.B) {
			r := newRand(1)
			x := make([]sortKey, 100_000)
			for i := range x {
				eff := wide{lo: r() % 13 * (1_000_000 + r()%1_000)}
				if whale && i == 0 {
					eff.hi = 1
				}
				x[i] = newSortKey(eff, r(), uint32(i), 100)
			}
			tie := func(a, b uint32) bool { return a < b }
			var s keySorter
			s.sort(x, tie) // its buffers grow once
			b.ReportAllocs()
			for b.Loop() {
				s.sort(x, tie)
			}
		})
	}
}

// TestHoldsAQuarter: the walk's choice of a sort (true) or a heap.
func TestHoldsAQuarter(t *testing.T) {
	gases := func(n int, g ...uint64) []cand { // n candidates, gas limits g in turn
		c := make([]cand, n)
		for i := range c {
			c[i].gas = g[i%len(g)]
		}
		return c
	}
	tests := []struct {
		name  string
		cands []cand
		room  uint64
		want  bool
	}{
		{"none", nil, 100, true},
		{"fewer than four", gases(3, 1000), 1, true},
		{"all fit", gases(100, 10), 1000, true},
		{"a quarter fit exactly", gases(100, 40), 1000, true},
		{"smallest lets fewer fit", gases(100, 41), 1000, false},
		{"one small among large", append(gases(99, 1000), cand{gas: 1}), 1000, false},
		{"a quarter small among large", gases(100, 1, 1000, 1000, 1000), 1000, true},
		{"gas 0 among large", gases(100, 0, 1000, 1000, 1000, 1000), 100, false},
		{"gas 0, a quarter", gases(100, 0, 1000, 1000, 1000), 100, true},
	}
	for _, tt := range tests {
		minGas := uint64(math.MaxUint64)
		for _, c := range tt.cands {
			minGas = min(minGas, c.gas)
		}
		if got := holdsAQuarter(tt.cands, minGas, tt.room); got != tt.want {
			t.Errorf("%s: holdsAQuarter = %v, want %v", tt.name, got, tt.want)
		}
	}
}
