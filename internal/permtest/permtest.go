// Package permtest holds the orders in which tests take every one of n
// things (cancel every entry of a bucket, every timer at a height): the
// ones that stress a structure that keeps insertion order differently.
// For tests only.
package permtest

import "math/rand/v2"

// An Order is a named permutation of 0..n-1.
type Order struct {
	Name string
	Perm func(n int) []int
}

// Orders are insertion order, reverse, random (seeded by n), every other
// one first, and the second half first.
var Orders = []Order{
	{"insertion", func(n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = i
		}
		return p
	}},
	{"reverse", func(n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = n - 1 - i
		}
		return p
	}},
	{"random", func(n int) []int { return rand.New(rand.NewPCG(uint64(n), 1)).Perm(n) }},
	{"every other", func(n int) []int {
		var p []int
		for i := 0; i < n; i += 2 {
			p = append(p, i)
		}
		for i := 1; i < n; i += 2 {
			p = append(p, i)
		}
		return p
	}},
	{"halves", func(n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = (i + n/2) % n
		}
		return p
	}},
}
