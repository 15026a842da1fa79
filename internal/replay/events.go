package replay

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/timerlane/timerlane/engine"
)

// event writes one JSON object per line, keys in the order given, with
// no allocation per field.
type event struct {
	w *bufio.Writer
}

func (ev *event) begin(kind string, height uint64) *event {
	ev.w.WriteString(`{"ev":"`)
	ev.w.WriteString(kind)
	ev.w.WriteString(`","height":`)
	ev.w.WriteString(strconv.FormatUint(height, 10))
	return ev
}

func (ev *event) key(k string) {
	ev.w.WriteString(`,"`)
	ev.w.WriteString(k)
	ev.w.WriteString(`":`)
}

func (ev *event) uint(k string, v uint64) *event {
	ev.key(k)
	var b [20]byte
	ev.w.Write(strconv.AppendUint(b[:0], v, 10))
	return ev
}

// amount writes a token amount as a decimal string (FORMAT.md).
func (ev *event) amount(k string, v engine.Amount) *event {
	ev.key(k)
	ev.w.WriteByte('"')
	ev.w.WriteString(v.String())
	ev.w.WriteByte('"')
	return ev
}

func (ev *event) int(k string, v int) *event { return ev.uint(k, uint64(v)) }

func (ev *event) bool(k string, v bool) *event {
	ev.key(k)
	if v {
		ev.w.WriteString("true")
	} else {
		ev.w.WriteString("false")
	}
	return ev
}

// str writes s as a JSON string. Handler names are decoded JSON strings
// and may hold any character.
func (ev *event) str(k, s string) *event {
	ev.key(k)
	b, _ := json.Marshal(s) // cannot fail for a string
	ev.w.Write(b)
	return ev
}

func (ev *event) raw(k, s string) *event {
	ev.key(k)
	ev.w.WriteByte('"')
	ev.w.WriteString(s)
	ev.w.WriteByte('"')
	return ev
}

// hex writes "0x" + lower-case hex of b.
func (ev *event) hex(k string, b []byte) *event {
	ev.key(k)
	ev.w.WriteString(`"0x`)
	var buf [128]byte
	for len(b) > 0 {
		n := min(len(b), len(buf)/2)
		hex.Encode(buf[:], b[:n])
		ev.w.Write(buf[:2*n])
		b = b[n:]
	}
	ev.w.WriteByte('"')
	return ev
}

func (ev *event) end() { ev.w.WriteString("}\n") }
