package u128

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"lukechampine.com/uint128"
)

var max128 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

// check compares one operation's result with big.Int's: the value when it
// fits, else 2^128-1 and false. op and args name the operation, formatted
// only on a failure.
func check(t *testing.T, got uint128.Uint128, ok bool, want *big.Int, op string, args ...any) {
	t.Helper()
	fits := want.Cmp(max128) <= 0
	if ok == fits && (fits && got.Big().Cmp(want) == 0 || !fits && got == uint128.Max) {
		return
	}
	t.Fatalf("%s = %v, %v; want %v (fits: %v)", fmt.Sprintf(op, args...), got, ok, want, fits)
}

// checkAll runs every operation on (a, b, n, d) against big.Int.
func checkAll(t *testing.T, a, b uint128.Uint128, n, d uint64) {
	t.Helper()
	ba, bb, bn := a.Big(), b.Big(), new(big.Int).SetUint64(n)
	sum := new(big.Int).Add(ba, bb)
	x, ok := Add(a, b)
	check(t, x, ok, sum, "Add(%v, %v)", a, b)
	if s := SatAdd(a, b); s != x {
		t.Fatalf("SatAdd(%v, %v) = %v, Add gives %v", a, b, s, x)
	}
	prod := new(big.Int).Mul(ba, bn)
	x, ok = Mul64(a, n)
	check(t, x, ok, prod, "Mul64(%v, %d)", a, n)
	if s := SatMul64(a, n); s != x {
		t.Fatalf("SatMul64(%v, %d) = %v, Mul64 gives %v", a, n, s, x)
	}
	if d == 0 {
		return
	}
	q := new(big.Int).Quo(prod, new(big.Int).SetUint64(d)) // floor: all non-negative
	x, ok = MulDiv64(a, n, d)
	check(t, x, ok, q, "MulDiv64(%v, %d, %d)", a, n, d)
}

func TestEdges(t *testing.T) {
	edges := []uint128.Uint128{
		uint128.Zero, uint128.From64(1), uint128.From64(math.MaxUint64),
		uint128.New(0, 1), uint128.New(math.MaxUint64, 1), uint128.New(0, math.MaxUint64),
		uint128.New(1, math.MaxUint64), uint128.Max.Sub64(1), uint128.Max,
		uint128.New(0, 1<<63), uint128.New(math.MaxUint64, 1<<63-1),
	}
	words := []uint64{0, 1, 2, 3, 7, 1 << 32, 1<<63 - 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64}
	for _, a := range edges {
		for _, b := range edges {
			for _, n := range words {
				for _, d := range words {
					checkAll(t, a, b, n, d)
				}
			}
		}
	}
}

// TestRandom: random operands of every size, 64 bits at a time, against
// big.Int.
func TestRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 128))
	word := func() uint64 { return r.Uint64() >> r.UintN(65) } // 0 to 64 bits, each as likely
	for range 200_000 {
		checkAll(t, uint128.New(word(), word()), uint128.New(word(), word()), word(), word())
	}
}

// FuzzArith checks every operation against big.Int on any operands.
func FuzzArith(f *testing.F) {
	f.Add(uint64(0), uint64(0), uint64(0), uint64(0), uint64(0), uint64(1))
	f.Add(uint64(math.MaxUint64), uint64(math.MaxUint64), uint64(1), uint64(0), uint64(math.MaxUint64), uint64(math.MaxUint64))
	f.Add(uint64(12345), uint64(1), uint64(math.MaxUint64), uint64(math.MaxUint64), uint64(3), uint64(2))
	f.Fuzz(func(t *testing.T, alo, ahi, blo, bhi, n, d uint64) {
		checkAll(t, uint128.New(alo, ahi), uint128.New(blo, bhi), n, d)
	})
}
