// Package u128 is overflow-checked arithmetic on lukechampine.com/uint128
// values (whose own Add and Mul panic on overflow): each operation returns
// its result, or 2^128-1 and false when the result does not fit, so a
// caller can fail or saturate, as the rule it implements says.
package u128

import (
	"math/bits"

	"lukechampine.com/uint128"
)

// Add is a + b.
func Add(a, b uint128.Uint128) (uint128.Uint128, bool) {
	lo, c := bits.Add64(a.Lo, b.Lo, 0)
	hi, c2 := bits.Add64(a.Hi, b.Hi, c)
	if c2 != 0 {
		return uint128.Max, false
	}
	return uint128.New(lo, hi), true
}

// Mul64 is a × n.
func Mul64(a uint128.Uint128, n uint64) (uint128.Uint128, bool) {
	hi1, lo := bits.Mul64(a.Lo, n)
	hi2, mid := bits.Mul64(a.Hi, n)
	hi, carry := bits.Add64(hi1, mid, 0)
	if hi2 != 0 || carry != 0 {
		return uint128.Max, false
	}
	return uint128.New(lo, hi), true
}

// MulDiv64 is floor(a × num / den), den > 0. a = q·den + r gives q·num +
// floor(r·num/den), where r·num < den·2^64 keeps the 128/64 division in
// range.
func MulDiv64(a uint128.Uint128, num, den uint64) (uint128.Uint128, bool) {
	q, r := a.QuoRem64(den)
	hi, lo := bits.Mul64(r, num)
	frac, _ := bits.Div64(hi, lo, den)
	whole, ok := Mul64(q, num)
	if !ok {
		return uint128.Max, false
	}
	return Add(whole, uint128.From64(frac))
}

// SatAdd is a + b, saturating at 2^128-1.
func SatAdd(a, b uint128.Uint128) uint128.Uint128 { x, _ := Add(a, b); return x }

// SatMul64 is a × n, saturating at 2^128-1.
func SatMul64(a uint128.Uint128, n uint64) uint128.Uint128 { x, _ := Mul64(a, n); return x }
