package trace

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// object is one JSON object of a trace line: its members by key, with the
// keys in order, after checking that no key repeats.
type object struct {
	keys []string
	vals map[string]json.RawMessage
	used map[string]bool
}

func decodeObject(raw []byte) (*object, error) {
	if err := loneSurrogate(raw); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", cleanErr(err, raw))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	o := &object{vals: map[string]json.RawMessage{}, used: map[string]bool{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not JSON: %v", cleanErr(err, raw))
		}
		k := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("not JSON: %v", cleanErr(err, raw))
		}
		if _, dup := o.vals[k]; dup {
			return nil, fmt.Errorf("repeated key %q", k)
		}
		o.keys = append(o.keys, k)
		o.vals[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not JSON: %v", cleanErr(err, raw))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value on the line")
	}
	return o, nil
}

func cleanErr(err error, raw []byte) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return errors.New("unexpected end of line")
	}
	// encoding/json names the first byte of a multi-byte character as a
	// character of its own ('Â' for a no-break space, U+00A0): name the
	// character. The text before the refused byte is valid JSON, which
	// allows no byte >= 0x80 outside a string, so the first such byte is
	// the refused one, if the refused one is such a byte.
	var se *json.SyntaxError
	if errors.As(err, &se) && refusedNonASCII(se.Error()) {
		if at := nonASCIIOutsideString(raw); at >= 0 {
			r, _ := utf8.DecodeRune(raw[at:])
			if r == utf8.RuneError {
				return fmt.Errorf("invalid byte %#02x outside a string, at byte %d of the line", raw[at], at)
			}
			return fmt.Errorf("invalid character %U outside a string, at byte %d of the line", r, at)
		}
	}
	return err
}

// refusedNonASCII reports whether msg, an encoding/json syntax error,
// refuses a byte >= 0x80 (quoted as the rune of that value).
func refusedNonASCII(msg string) bool {
	quoted, ok := strings.CutPrefix(msg, "invalid character '")
	if !ok {
		return false
	}
	r, _ := utf8.DecodeRuneInString(quoted)
	return r >= utf8.RuneSelf
}

// nonASCIIOutsideString is the offset of the first byte >= 0x80 of raw
// that is not inside a JSON string, or -1.
func nonASCIIOutsideString(raw []byte) int {
	in, esc := false, false
	for i, c := range raw {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && c >= utf8.RuneSelf:
			return i
		}
	}
	return -1
}

func (o *object) has(k string) bool { _, ok := o.vals[k]; return ok }

// get returns the raw value of k and marks k as known.
func (o *object) get(k string) (json.RawMessage, bool) {
	v, ok := o.vals[k]
	o.used[k] = true
	return v, ok
}

// unknown returns the first key that no reader asked for, if any ("" is
// a key like any other, and unknown).
func (o *object) unknown() (string, bool) {
	for _, k := range o.keys {
		if !o.used[k] {
			return k, true
		}
	}
	return "", false
}

func typeName(v json.RawMessage) string {
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// integer parses a JSON integer in [0, 2^63-1].
func integer(v json.RawMessage) (uint64, error) {
	s := string(v)
	if len(s) == 0 || !(s[0] == '-' || s[0] >= '0' && s[0] <= '9') {
		return 0, fmt.Errorf("must be an integer, not %s", typeName(v))
	}
	for _, c := range s {
		if c == '.' || c == 'e' || c == 'E' {
			return 0, fmt.Errorf("%s: must be an integer", s)
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > math.MaxInt64 {
		return 0, fmt.Errorf("%s: out of range 0 .. 2^63-1", s)
	}
	return n, nil
}

func str(v json.RawMessage) (string, error) {
	var s string
	if v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", fmt.Errorf("must be a string, not %s", typeName(v))
	}
	return s, nil
}

func boolean(v json.RawMessage) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("must be true or false, not %s", typeName(v))
}

// hexBytes parses "0x" + an even number of hex digits of either case. The
// prefix is "0x" only (FORMAT.md: "0x" + hex, the case being the
// digits'): "0X" is refused.
func hexBytes(v json.RawMessage) ([]byte, error) {
	s, err := str(v)
	if err != nil {
		return nil, err
	}
	if len(s) < 2 || s[0] != '0' || s[1] != 'x' {
		return nil, fmt.Errorf("%q: must be 0x followed by hex digits", short(s))
	}
	if len(s)%2 != 0 {
		return nil, fmt.Errorf("%q: odd number of hex digits", short(s))
	}
	b, err := hex.DecodeString(s[2:])
	if err != nil {
		return nil, fmt.Errorf("%q: not hex", short(s))
	}
	return b, nil
}

// address parses "0x" + 40 hex digits.
func address(v json.RawMessage) ([20]byte, error) {
	var a [20]byte
	b, err := hexBytes(v)
	if err != nil {
		return a, err
	}
	if len(b) != 20 {
		return a, fmt.Errorf("address of %d bytes, want 20", len(b))
	}
	copy(a[:], b)
	return a, nil
}

var maxAmount = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

// amount parses a decimal string in [0, 2^128-1] and returns it as given.
func amount(v json.RawMessage) (string, error) {
	s, err := str(v)
	if err != nil {
		return "", fmt.Errorf("must be a decimal string, not %s", typeName(v))
	}
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || s == "" || s[0] == '+' || s[0] == '-' || (len(s) > 1 && s[0] == '0') {
		return "", fmt.Errorf("%q: must be a decimal string: digits only, no sign, no leading zero", short(s))
	}
	if n.Cmp(maxAmount) > 0 {
		return "", fmt.Errorf("%q: out of range 0 .. 2^128-1", short(s))
	}
	return s, nil
}

func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// loneSurrogate reports a \u escape of a UTF-16 surrogate that is not
// half of a pair: encoding/json turns each into U+FFFD, so two different
// strings (labels, keys) would read as the same one.
func loneSurrogate(raw []byte) error {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		switch {
		case !ok:
			i++ // an escape of another kind, \\ included: skip its second byte
		case r >= 0xd800 && r < 0xdc00:
			if lo, ok := hex4(i + 6); ok && lo >= 0xdc00 && lo < 0xe000 {
				i += 11
				continue
			}
			return fmt.Errorf("\\u%04x: a UTF-16 high surrogate without its low half", r)
		case r >= 0xdc00 && r < 0xe000:
			return fmt.Errorf("\\u%04x: a UTF-16 low surrogate without its high half", r)
		default:
			i += 5
		}
	}
	return nil
}
