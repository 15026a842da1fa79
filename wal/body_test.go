package wal

import (
	"encoding/binary"
	"math/rand/v2"
)

// Change kinds of the realistic test bodies, modelled on what the engine
// will log per block: a scheduled timer (id, owner, height, sequence,
// handler and payload lengths, the payload), a cancelled or fired timer (its
// id).
const (
	chSchedule = 1
	chCancel   = 2
	chFire     = 3
)

// bodyGen makes realistic block bodies: timer ids are keccak-like random
// 32-byte strings, owners come from a population of 10,000 actor addresses,
// heights are the block's height plus 1..1000, sequence numbers grow.
type bodyGen struct {
	rng    *rand.Rand
	actors [][20]byte
	seq    uint64
	live   [][32]byte // ids scheduled earlier, for cancels and fires
}

func newBodyGen(seed uint64) *bodyGen {
	g := &bodyGen{rng: rand.New(rand.NewPCG(seed, 0x7469_6d65))}
	g.actors = make([][20]byte, 10_000)
	for i := range g.actors {
		g.fill(g.actors[i][:])
	}
	return g
}

func (g *bodyGen) fill(b []byte) {
	for i := 0; i < len(b); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], g.rng.Uint64())
		copy(b[i:], w[:])
	}
}

// block returns the body of a block at height with n changes; schedOnly
// makes every change a schedule with an empty payload.
func (g *bodyGen) block(dst []byte, height uint64, n int, schedOnly bool) []byte {
	dst = dst[:0]
	for range n {
		kind := chSchedule
		if !schedOnly && len(g.live) > 0 {
			switch r := g.rng.IntN(10); {
			case r < 2:
				kind = chCancel
			case r < 4:
				kind = chFire
			}
		}
		switch kind {
		case chSchedule:
			var id [32]byte
			g.fill(id[:])
			dst = append(dst, chSchedule)
			dst = append(dst, id[:]...)
			dst = append(dst, g.actors[g.rng.IntN(len(g.actors))][:]...)
			dst = binary.LittleEndian.AppendUint64(dst, height+1+g.rng.Uint64N(1000))
			g.seq++
			dst = binary.LittleEndian.AppendUint64(dst, g.seq)
			dst = binary.LittleEndian.AppendUint16(dst, 0) // handler length (default handler)
			dst = binary.LittleEndian.AppendUint32(dst, 0) // payload length
			if len(g.live) < 100_000 {
				g.live = append(g.live, id)
			} else {
				g.live[g.rng.IntN(len(g.live))] = id
			}
		default:
			i := g.rng.IntN(len(g.live))
			dst = append(dst, byte(kind))
			dst = append(dst, g.live[i][:]...)
		}
	}
	return dst
}
