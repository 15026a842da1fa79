package engine_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/sha3"

	"github.com/timerlane/timerlane/engine"
)

var (
	actorA = engine.Address{0xaa}
	actorB = engine.Address{0xbb}
)

// recorder is an Executor that records deliveries and runs an optional hook.
type recorder struct {
	fired []fired
	hook  func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error)
}

type fired struct {
	id      engine.TimerID
	actor   engine.Address
	handler string
	payload string
	height  uint64
	block   uint64
}

func (r *recorder) Execute(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
	r.fired = append(r.fired, fired{d.TimerID, d.Actor, string(d.Handler), string(d.Payload), d.Height, d.Block})
	if r.hook != nil {
		return r.hook(tx, d)
	}
	return engine.Usage{Cycles: 1}, nil
}

func newEngine(t *testing.T, mod func(*engine.Config)) *engine.Engine {
	t.Helper()
	cfg := engine.DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	e, err := engine.New(cfg)
	require.NoError(t, err)
	return e
}

// inBlock runs f in a committed transaction of actor in block h.
func inBlock(t *testing.T, e *engine.Engine, h uint64, actor engine.Address, f func(tx engine.Tx)) {
	t.Helper()
	require.NoError(t, e.BeginBlock(h))
	tx, err := e.Begin(actor, 1)
	require.NoError(t, err)
	f(tx)
	require.NoError(t, tx.Commit())
	_, err = e.EndBlock(&recorder{})
	require.NoError(t, err)
	require.NoError(t, e.Commit())
}

func routed(handler string, payload []byte) []byte {
	return []byte(fmt.Sprintf(`{"_handler":%q,"_payload":%q}`, handler, base64.StdEncoding.EncodeToString(payload)))
}

func TestScheduleEdges(t *testing.T) {
	const cur = 100
	tests := []struct {
		name    string
		height  uint64
		payload []byte
		want    error
		handler string // on success
		body    string
	}{
		{"height is current", cur, nil, engine.ErrHeightNotInFuture, "", ""},
		{"height in the past", cur - 1, nil, engine.ErrHeightNotInFuture, "", ""},
		{"height zero", 0, nil, engine.ErrHeightNotInFuture, "", ""},
		{"height current+1", cur + 1, nil, nil, "handle_timer", ""},
		{"far future", cur + 1<<40, []byte{1}, nil, "handle_timer", "\x01"},
		{"height 2^64-1", math.MaxUint64, []byte{2}, nil, "handle_timer", "\x02"},
		{"empty payload", cur + 1, []byte{}, nil, "handle_timer", ""},
		{"maximal payload", cur + 1, bytes.Repeat([]byte{7}, 64), nil, "handle_timer", strings.Repeat("\x07", 64)},
		{"payload one too long", cur + 1, bytes.Repeat([]byte{7}, 65), engine.ErrPayloadTooLarge, "", ""},
		{"handler of 0 bytes", cur + 1, routed("", []byte("x")), engine.ErrInvalidHandler, "", ""},
		{"handler of 8 bytes", cur + 1, routed("abcdefgh", []byte("x")), nil, "abcdefgh", "x"},
		{"handler of 9 bytes", cur + 1, routed("abcdefghi", []byte("x")), engine.ErrInvalidHandler, "", ""},
		{"handler counted in bytes", cur + 1, routed("ééééé", nil), engine.ErrInvalidHandler, "", ""},
		{"invalid base64 is not routed", cur + 1, []byte(`{"_handler":"","_payload":"a!=="}`), nil, "handle_timer", `{"_handler":"","_payload":"a!=="}`},
		{"unpadded base64 is not routed", cur + 1, []byte(`{"_handler":"h","_payload":"aGk"}`), nil, "handle_timer", `{"_handler":"h","_payload":"aGk"}`},
		{"base64 with a newline is not routed", cur + 1, []byte(`{"_handler":"h","_payload":"aG\nk="}`), nil, "handle_timer", `{"_handler":"h","_payload":"aG\nk="}`},
		{"payload too large beats invalid handler", cur + 1, append(routed("", nil), bytes.Repeat([]byte(" "), 64)...), engine.ErrPayloadTooLarge, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, func(c *engine.Config) { c.MaxPayloadBytes = 64; c.MaxHandlerBytes = 8 })
			inBlock(t, e, cur-1, actorB, func(engine.Tx) {})
			require.NoError(t, e.BeginBlock(cur))
			tx, err := e.Begin(actorA, 1)
			require.NoError(t, err)
			id, cost, err := tx.Schedule(tt.height, tt.payload)
			require.NoError(t, tx.Commit())
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
				require.Equal(t, engine.Cost{}, cost)
				require.Zero(t, e.Pending(), "a failed schedule leaves nothing pending")
				return
			}
			require.NoError(t, err)
			require.Equal(t, engine.Cost{Cycles: 1000, Cells: uint64(len(tt.payload))}, cost)
			got, ok := e.Lookup(id)
			require.True(t, ok)
			require.Equal(t, tt.handler, got.Handler)
			require.Equal(t, tt.body, string(got.Payload))
			require.Equal(t, tt.height, got.Height)
		})
	}
}

func TestPerActorCap(t *testing.T) {
	e := newEngine(t, nil) // the CIP-5 cap: 1024
	require.NoError(t, e.BeginBlock(1))
	tx, err := e.Begin(actorA, 1)
	require.NoError(t, err)
	for i := range 1024 {
		_, _, err := tx.Schedule(2+uint64(i%7), []byte(fmt.Sprint(i)))
		require.NoError(t, err, "timer %d", i+1)
	}
	_, _, err = tx.Schedule(2, []byte("the 1025th"))
	require.ErrorIs(t, err, engine.ErrTooManyTimers)
	require.Equal(t, "TooManyTimers", engine.ErrorName(err))
	require.NoError(t, tx.Commit())

	// Another actor is not affected; a cancel frees one slot.
	txB, err := e.Begin(actorB, 1)
	require.NoError(t, err)
	_, _, err = txB.Schedule(2, nil)
	require.NoError(t, err)
	require.NoError(t, txB.Commit())
	require.Equal(t, 1024, e.PendingOf(actorA))
	require.Equal(t, 1, e.PendingOf(actorB))
}

func TestCancelEdges(t *testing.T) {
	e := newEngine(t, nil)
	var mine, theirs, soon engine.TimerID
	require.NoError(t, e.BeginBlock(10))
	tx, _ := e.Begin(actorA, 1)
	mine, _, _ = tx.Schedule(20, []byte("a"))
	soon, _, _ = tx.Schedule(11, []byte("b"))
	require.NoError(t, tx.Commit())
	tx, _ = e.Begin(actorB, 1)
	theirs, _, _ = tx.Schedule(20, []byte("c"))
	require.NoError(t, tx.Commit())
	_, err := e.EndBlock(&recorder{})
	require.NoError(t, err)
	require.NoError(t, e.Commit())

	require.NoError(t, e.BeginBlock(11))
	_, err = e.EndBlock(&recorder{}) // soon fires
	require.NoError(t, err)
	require.NoError(t, e.Commit())

	require.NoError(t, e.BeginBlock(12))
	tx, _ = e.Begin(actorA, 2)
	for _, c := range []struct {
		name string
		id   engine.TimerID
		want error
	}{
		{"fired", soon, engine.ErrUnknownTimer},
		{"unknown", engine.TimerID{1, 2, 3}, engine.ErrUnknownTimer},
		{"foreign", theirs, engine.ErrNotOwner},
		{"own", mine, nil},
		{"own again", mine, engine.ErrUnknownTimer},
	} {
		cost, err := tx.Cancel(c.id)
		if c.want == nil {
			require.NoError(t, err, c.name)
			require.Equal(t, engine.Cost{Cycles: 500}, cost, c.name)
		} else {
			require.ErrorIs(t, err, c.want, c.name)
		}
	}
	require.NoError(t, tx.Commit())
	require.Equal(t, 1, e.Pending())
}

func TestRevertRestoresEverything(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.MaxTimersPerActor = 2 })
	require.NoError(t, e.BeginBlock(1))
	tx, _ := e.Begin(actorA, 1)
	keep, _, err := tx.Schedule(3, []byte("keep"))
	require.NoError(t, err)
	require.NoError(t, tx.Commit())

	tx, _ = e.Begin(actorA, 2)
	_, err = tx.Cancel(keep)
	require.NoError(t, err)
	_, _, err = tx.Schedule(3, []byte("x"))
	require.NoError(t, err)
	_, _, err = tx.Schedule(3, []byte("y"))
	require.NoError(t, err)
	_, _, err = tx.Schedule(3, []byte("z"))
	require.ErrorIs(t, err, engine.ErrTooManyTimers)
	require.NoError(t, tx.Revert())

	require.Equal(t, 1, e.Pending())
	require.Equal(t, 1, e.PendingOf(actorA))
	got, ok := e.Lookup(keep)
	require.True(t, ok)
	require.Equal(t, "keep", string(got.Payload))

	// The same schedule after a revert gets the same id and the next FIFO slot.
	tx, _ = e.Begin(actorA, 3)
	later, _, err := tx.Schedule(3, []byte("later"))
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	rec := &recorder{}
	_, err = e.EndBlock(rec)
	require.NoError(t, err)
	require.NoError(t, e.Commit())
	require.NoError(t, e.BeginBlock(2))
	_, _ = e.EndBlock(rec)
	require.NoError(t, e.Commit())
	require.NoError(t, e.BeginBlock(3))
	res, err := e.EndBlock(rec)
	require.NoError(t, err)
	require.Equal(t, 2, res.Fired)
	require.Equal(t, []engine.TimerID{keep, later}, []engine.TimerID{rec.fired[0].id, rec.fired[1].id})
	tl, _ := e.Lookup(later)
	require.Zero(t, tl.Seq, "fired timers are no longer pending")
}

func TestHandlerRules(t *testing.T) {
	e := newEngine(t, nil)
	require.NoError(t, e.BeginBlock(1))
	tx, _ := e.Begin(actorA, 1)
	first, _, _ := tx.Schedule(2, []byte("1"))
	second, _, _ := tx.Schedule(2, []byte("2"))
	require.NoError(t, tx.Commit())
	_, _ = e.EndBlock(&recorder{})
	require.NoError(t, e.Commit())

	require.NoError(t, e.BeginBlock(2))
	var scheduled engine.TimerID
	rec := &recorder{hook: func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
		if d.TimerID != first {
			return engine.Usage{}, errors.New("second handler reverts")
		}
		// The other due timer is already out of the pending set.
		_, err := tx.Cancel(second)
		require.ErrorIs(t, err, engine.ErrUnknownTimer)
		_, _, err = tx.Schedule(2, nil)
		require.ErrorIs(t, err, engine.ErrHeightNotInFuture)
		scheduled, _, err = tx.Schedule(3, []byte("next"))
		require.NoError(t, err)
		from, ok := tx.FromTimer()
		require.True(t, ok)
		require.Equal(t, first, from)
		require.ErrorIs(t, tx.Commit(), engine.ErrHandlerTx)
		return engine.Usage{Cycles: 550_000, Cells: 550_000}, nil // exactly the limits: no revert
	}}
	res, err := e.EndBlock(rec)
	require.NoError(t, err)
	require.Equal(t, 2, res.Fired)
	require.Equal(t, 1, res.Pending)
	require.Len(t, rec.fired, 2)
	require.Equal(t, second, rec.fired[1].id, "the cancel did not stop it")
	_, ok := e.Lookup(scheduled)
	require.True(t, ok)
}

func TestHandlerOverLimitReverts(t *testing.T) {
	e := newEngine(t, nil)
	require.NoError(t, e.BeginBlock(1))
	tx, _ := e.Begin(actorA, 1)
	_, _, _ = tx.Schedule(2, nil)
	require.NoError(t, tx.Commit())
	_, _ = e.EndBlock(&recorder{})
	require.NoError(t, e.Commit())
	require.NoError(t, e.BeginBlock(2))
	res, err := e.EndBlock(&recorder{hook: func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
		_, _, err := tx.Schedule(5, nil)
		require.NoError(t, err)
		return engine.Usage{Cycles: d.CyclesLimit + 1}, nil
	}})
	require.NoError(t, err)
	require.Equal(t, 1, res.Fired)
	require.Zero(t, res.Pending, "the over-limit handler's schedule was reverted")
}

func TestDeliveryFields(t *testing.T) {
	e := newEngine(t, nil)
	require.NoError(t, e.BeginBlock(7))
	tx, _ := e.Begin(actorA, 9)
	id, _, err := tx.Schedule(8, routed("settle", []byte("hello")))
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	_, _ = e.EndBlock(&recorder{})
	require.NoError(t, e.Commit())
	require.NoError(t, e.BeginBlock(8))
	var got engine.Delivery
	_, err = e.EndBlock(&recorder{hook: func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
		got = *d
		got.Handler = bytes.Clone(d.Handler)
		got.Payload = bytes.Clone(d.Payload)
		return engine.Usage{}, nil
	}})
	require.NoError(t, err)
	require.Equal(t, engine.Delivery{
		TimerID: id, Actor: actorA, Sender: actorA, Handler: []byte("settle"), Payload: []byte("hello"),
		Height: 8, Block: 8, CyclesLimit: 550_000, CellsLimit: 550_000,
	}, got)
}

func TestLifecycleMisuse(t *testing.T) {
	e := newEngine(t, nil)
	_, err := e.Begin(actorA, 1)
	require.ErrorIs(t, err, engine.ErrNoBlock)
	_, err = e.EndBlock(&recorder{})
	require.ErrorIs(t, err, engine.ErrNoBlock)
	require.ErrorIs(t, e.Commit(), engine.ErrNoBlock)
	require.ErrorIs(t, e.BeginBlock(0), engine.ErrBadHeight)

	require.NoError(t, e.BeginBlock(5))
	require.ErrorIs(t, e.BeginBlock(6), engine.ErrBlockOpen)
	tx, err := e.Begin(actorA, 1)
	require.NoError(t, err)
	_, err = e.Begin(actorB, 1)
	require.ErrorIs(t, err, engine.ErrTxOpen)
	_, err = e.EndBlock(&recorder{})
	require.ErrorIs(t, err, engine.ErrTxOpen)
	require.NoError(t, tx.Commit())
	require.ErrorIs(t, tx.Commit(), engine.ErrTxClosed)
	_, _, err = tx.Schedule(9, nil)
	require.ErrorIs(t, err, engine.ErrTxClosed)
	_, err = e.EndBlock(&recorder{})
	require.NoError(t, err)
	require.ErrorIs(t, e.BeginBlock(6), engine.ErrBlockEnded)
	_, err = e.SkipEmpty(10)
	require.ErrorIs(t, err, engine.ErrBlockEnded)
	require.NoError(t, e.Commit())
	require.ErrorIs(t, e.BeginBlock(7), engine.ErrBadHeight)
	require.ErrorIs(t, e.BeginBlock(5), engine.ErrBadHeight)
	require.NoError(t, e.BeginBlock(6))
}

func TestLastHeight(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.RingSize, c.EpochLength, c.EpochCount = 4, 2, 2 })
	require.NoError(t, e.BeginBlock(math.MaxUint64-3))
	tx, _ := e.Begin(actorA, 1)
	for h := uint64(math.MaxUint64 - 2); ; h++ {
		_, _, err := tx.Schedule(h, nil)
		require.NoError(t, err)
		if h == math.MaxUint64 {
			break
		}
	}
	require.NoError(t, tx.Commit())
	_, _ = e.EndBlock(&recorder{})
	require.NoError(t, e.Commit())
	rec := &recorder{}
	for h := uint64(math.MaxUint64 - 2); ; h++ {
		require.NoError(t, e.BeginBlock(h))
		res, err := e.EndBlock(rec)
		require.NoError(t, err)
		require.Equal(t, 1, res.Fired, "height %d", h)
		require.NoError(t, e.Commit())
		if h == math.MaxUint64 {
			break
		}
	}
	require.ErrorIs(t, e.BeginBlock(0), engine.ErrBadHeight, "no block after 2^64-1")
	require.Len(t, rec.fired, 3)
}

func TestSkipEmptyStopsBeforeDue(t *testing.T) {
	for _, layout := range [][3]uint64{{2, 1, 1}, {4, 2, 2}, {16, 8, 3}, {4096, 1024, 64}} {
		t.Run(fmt.Sprint(layout), func(t *testing.T) {
			e := newEngine(t, func(c *engine.Config) { c.RingSize, c.EpochLength, c.EpochCount = layout[0], layout[1], layout[2] })
			due := []uint64{5, 6, 900, 70_000, 5_000_000, 1 << 50}
			require.NoError(t, e.BeginBlock(1))
			tx, _ := e.Begin(actorA, 1)
			for _, h := range due {
				_, _, err := tx.Schedule(h, nil)
				require.NoError(t, err)
			}
			require.NoError(t, tx.Commit())
			rec := &recorder{}
			_, _ = e.EndBlock(rec)
			require.NoError(t, e.Commit())
			for e.Height() < 1<<50+10 {
				h, err := e.SkipEmpty(1<<50 + 10)
				require.NoError(t, err)
				if h == 1<<50+10 {
					break
				}
				require.NoError(t, e.BeginBlock(h+1))
				_, err = e.EndBlock(rec)
				require.NoError(t, err)
				require.NoError(t, e.Commit())
			}
			var heights []uint64
			for _, f := range rec.fired {
				require.Equal(t, f.height, f.block, "delivered at its height")
				heights = append(heights, f.block)
			}
			require.Equal(t, due, heights)
		})
	}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*engine.Config)
		want string
	}{
		{"ring not a power of two", func(c *engine.Config) { c.RingSize = 3 }, "ring_size 3"},
		{"ring of one", func(c *engine.Config) { c.RingSize = 1; c.EpochLength = 1 }, "ring_size 1"},
		{"epoch longer than ring", func(c *engine.Config) { c.EpochLength = c.RingSize + 1 }, "epoch_length"},
		{"epoch length zero", func(c *engine.Config) { c.EpochLength = 0 }, "epoch_length 0"},
		{"no epochs", func(c *engine.Config) { c.EpochCount = 0 }, "epoch_count 0"},
		{"payload over 1 MiB", func(c *engine.Config) { c.MaxPayloadBytes = 1<<20 + 1 }, "max_payload_bytes"},
		// The lane's parameters under fifo too: New built the fairness
		// window from a window of 0 blocks and panicked.
		{"fifo, fairness window of 0", func(c *engine.Config) { c.Lane.FairnessWindowBlocks = 0 }, "fairness_window_blocks 0"},
		{"fifo, lane of 0 cycles", func(c *engine.Config) { c.Lane.LaneTimerCycles = 0 }, "lane_timer_cycles 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := engine.DefaultConfig()
			tt.mod(&cfg)
			_, err := engine.New(cfg)
			require.ErrorIs(t, err, engine.ErrInvalidConfig)
			require.Contains(t, err.Error(), tt.want)
			dir := filepath.Join(t.TempDir(), "db")
			_, err = engine.Open(dir, cfg)
			require.ErrorIs(t, err, engine.ErrInvalidConfig)
			require.NoDirExists(t, dir, "Open checks the config before it creates anything")
		})
	}
	_, err := engine.New(engine.DefaultConfig())
	require.NoError(t, err)
}

// TestZeroLimits: FORMAT.md bounds only the layout, so limits of 0 are a
// configuration like any other: no actor may have a timer pending, or no
// payload may route (the default handler is never checked against
// max_handler_bytes).
func TestZeroLimits(t *testing.T) {
	routed := []byte(`{"_handler":"h","_payload":""}`)
	for _, tt := range []struct {
		name    string
		mod     func(*engine.Config)
		payload []byte
		want    error
	}{
		{"no timers per actor", func(c *engine.Config) { c.MaxTimersPerActor = 0 }, nil, engine.ErrTooManyTimers},
		{"no handler bytes, routed", func(c *engine.Config) { c.MaxHandlerBytes = 0 }, routed, engine.ErrInvalidHandler},
		{"no handler bytes, default handler", func(c *engine.Config) { c.MaxHandlerBytes = 0 }, []byte("x"), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := engine.DefaultConfig()
			tt.mod(&cfg)
			e, err := engine.New(cfg)
			require.NoError(t, err)
			require.NoError(t, e.BeginBlock(1))
			tx, err := e.Begin(engine.Address{1}, 1)
			require.NoError(t, err)
			_, _, err = tx.Schedule(2, tt.payload)
			require.ErrorIs(t, err, tt.want)
			require.NoError(t, tx.Commit())
			want := 1
			if tt.want != nil {
				want = 0
			}
			require.Equal(t, want, e.Pending())
		})
	}
}

func TestMillionAtOneHeight(t *testing.T) {
	if testing.Short() {
		t.Skip("a million timers")
	}
	const n = 1_000_000
	e := newEngine(t, nil)
	require.NoError(t, e.BeginBlock(1))
	var payload [4]byte
	for a := 0; a < n/1000; a++ {
		tx, _ := e.Begin(engine.Address{byte(a), byte(a >> 8), 1}, 1)
		for i := range 1000 {
			payload = [4]byte{byte(i), byte(i >> 8), byte(a), byte(a >> 8)}
			_, _, err := tx.Schedule(2, payload[:])
			require.NoError(t, err)
		}
		require.NoError(t, tx.Commit())
	}
	_, _ = e.EndBlock(&recorder{})
	require.NoError(t, e.Commit())
	require.NoError(t, e.BeginBlock(2))
	count := 0
	res, err := e.EndBlock(executorFunc(func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
		a, i := int(d.Payload[2])|int(d.Payload[3])<<8, int(d.Payload[0])|int(d.Payload[1])<<8
		if a*1000+i != count {
			t.Fatalf("delivery %d is timer %d of actor %d: out of order", count, i, a)
		}
		count++
		return engine.Usage{}, nil
	}))
	require.NoError(t, err)
	require.Equal(t, n, res.Fired)
	require.Equal(t, n, count)
	require.Zero(t, e.Pending())
}

type executorFunc func(engine.Tx, *engine.Delivery) (engine.Usage, error)

func (f executorFunc) Execute(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
	return f(tx, d)
}

// TestTimerIDPreimage checks ids against keccak256(actor || height ||
// payload || nonce) computed apart, for payloads on both sides of the
// length up to which the engine hashes the preimage in one piece, with
// every byte of the actor, the height and the nonce different (the engine
// packs them into words).
func TestTimerIDPreimage(t *testing.T) {
	var distinct engine.Address
	for i := range distinct {
		distinct[i] = byte(0xc1 + i)
	}
	for _, actor := range []engine.Address{actorA, distinct} {
		for _, n := range []int{0, 1, 7, 8, 32, 99, 100, 101, 135, 136, 1000} {
			e := newEngine(t, nil)
			require.NoError(t, e.BeginBlock(1))
			const nonce, height = 0x0102030405060708, 0x1122334455667788
			tx, err := e.Begin(actor, nonce)
			require.NoError(t, err)
			payload := bytes.Repeat([]byte{0xab}, n)
			id, _, err := tx.Schedule(height, payload)
			require.NoError(t, err)
			require.NoError(t, tx.Commit())

			h := sha3.NewLegacyKeccak256()
			h.Write(actor[:])
			h.Write(binary.BigEndian.AppendUint64(nil, height))
			h.Write(payload)
			h.Write(binary.BigEndian.AppendUint64(nil, nonce))
			require.Equal(t, h.Sum(nil), id[:], "actor %x, payload of %d bytes", actor, n)
		}
	}
}
