package tracemodel

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"slices"
	"strconv"
)

// TraceError is a trace error: what FORMAT.md has the command report as
// "line N: <what is wrong>" with exit status 2.
type TraceError struct {
	Line int
	Msg  string
}

func (e *TraceError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// maxInt is the largest integer a trace may write (FORMAT.md: 0 .. 2^63-1).
const maxInt = 1<<63 - 1

// u128Max returns 2^128-1, the largest token amount. A function rather than
// a package variable, since a shared *big.Int could be changed by mistake.
func u128Max() *big.Int {
	return new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))
}

// decodeLine decodes a trace line that must be exactly one JSON object.
// Objects become map[string]any, arrays []any, numbers json.Number (so that
// 1.0 and 1e3 can be told from 1). A key repeated in any object of the line
// is an error (FORMAT.md), which encoding/json's Unmarshal would hide by
// keeping the last value, so the line is walked token by token.
func decodeLine(text []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not one JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // string, json.Number, bool or nil
	}
	switch delim {
	case '{':
		m := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("not JSON: %v", err)
			}
			k := kt.(string) // the decoder allows only a string here
			if _, dup := m[k]; dup {
				return nil, fmt.Errorf("repeated key %q", k)
			}
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		if _, err := dec.Token(); err != nil { // the closing brace
			return nil, fmt.Errorf("not JSON: %v", err)
		}
		return m, nil
	case '[':
		a := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("not JSON: %v", err)
		}
		return a, nil
	}
	return nil, fmt.Errorf("not JSON: unexpected %v", delim)
}

// reader holds the first error found in one trace line; later reads of the
// line return zero values, so an op's parsing code reads straight through
// and checks once.
type reader struct {
	line int
	err  error
}

func (r *reader) failf(format string, args ...any) {
	if r.err == nil {
		r.err = &TraceError{Line: r.line, Msg: fmt.Sprintf(format, args...)}
	}
}

// object reads the fields of one JSON object of a line and remembers which
// it read, so that done can refuse the others (FORMAT.md: an unknown field
// is a trace error; nothing is silently ignored).
type object struct {
	r    *reader
	name string // where the object is, for messages: "tx", "tx.calls[1]"; "" before the op is known
	m    map[string]any
	read map[string]bool
}

func (r *reader) object(name string, v any) object {
	m, ok := v.(map[string]any)
	if !ok {
		r.failf("%s: not an object", name)
		m = map[string]any{}
	}
	return object{r: r, name: name, m: m, read: map[string]bool{}}
}

func (o object) has(key string) bool {
	_, ok := o.m[key]
	return ok
}

func (o object) get(key string) (any, bool) {
	v, ok := o.m[key]
	if ok {
		o.read[key] = true
	}
	return v, ok
}

func (o object) failf(key, format string, args ...any) {
	if o.name == "" {
		o.r.failf("%s: %s", key, fmt.Sprintf(format, args...))
		return
	}
	o.r.failf("%s.%s: %s", o.name, key, fmt.Sprintf(format, args...))
}

// require refuses the object if one of keys is missing.
func (o object) require(keys ...string) {
	for _, k := range keys {
		if !o.has(k) {
			o.failf(k, "missing")
		}
	}
}

// done refuses the fields nobody read and returns the line's first error.
func (o object) done() error {
	var unknown []string
	for k := range o.m {
		if !o.read[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		o.failf(unknown[0], "unknown field")
	}
	return o.r.err
}

var decimalRE = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// int reads a JSON integer in 0 .. 2^63-1. SPEC §11: 1.0, 1e3 and -0 are
// not integers of the trace, so the number's text is checked, not its value.
func (o object) int(key string) (uint64, bool) {
	v, ok := o.get(key)
	if !ok {
		return 0, false
	}
	n, isNum := v.(json.Number)
	if !isNum {
		o.failf(key, "not an integer")
		return 0, false
	}
	s := n.String()
	if !decimalRE.MatchString(s) {
		o.failf(key, "%s: not an integer in 0 .. 2^63-1", s)
		return 0, false
	}
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil || u > maxInt {
		o.failf(key, "%s: out of range", s)
		return 0, false
	}
	return u, true
}

// amount reads a token amount: a decimal string in 0 .. 2^128-1, with one
// spelling per value (SPEC §11: no leading zero, no sign, no space).
func (o object) amount(key string) (*big.Int, bool) {
	s, ok := o.str(key)
	if !ok {
		return nil, false
	}
	return o.amountText(key, s)
}

func (o object) amountText(key, s string) (*big.Int, bool) {
	if !decimalRE.MatchString(s) {
		o.failf(key, "%q: not a decimal amount", s)
		return nil, false
	}
	a, _ := new(big.Int).SetString(s, 10)
	if a.Cmp(u128Max()) > 0 {
		o.failf(key, "%s: above 2^128-1", s)
		return nil, false
	}
	return a, true
}

func (o object) str(key string) (string, bool) {
	v, ok := o.get(key)
	if !ok {
		return "", false
	}
	s, isStr := v.(string)
	if !isStr {
		o.failf(key, "not a string")
		return "", false
	}
	return s, true
}

func (o object) boolean(key string) (bool, bool) {
	v, ok := o.get(key)
	if !ok {
		return false, false
	}
	b, isBool := v.(bool)
	if !isBool {
		o.failf(key, "not a boolean")
		return false, false
	}
	return b, true
}

// bytes reads "0x" + an even number of hex digits of either case. SPEC §11:
// the prefix itself must be "0x".
func (o object) bytes(key string) ([]byte, bool) {
	s, ok := o.str(key)
	if !ok {
		return nil, false
	}
	if len(s) < 2 || s[:2] != "0x" {
		o.failf(key, "%q: not 0x and hex", s)
		return nil, false
	}
	b, err := hex.DecodeString(s[2:])
	if err != nil {
		o.failf(key, "%q: not 0x and an even number of hex digits", s)
		return nil, false
	}
	return b, true
}

// address reads a 20-byte address and returns it in the form events print:
// "0x" and lower-case hex, which is also the model's key for the account.
func (o object) address(key string) (string, bool) {
	b, ok := o.bytes(key)
	if !ok {
		return "", false
	}
	if len(b) != 20 {
		o.failf(key, "not 20 bytes")
		return "", false
	}
	return hexString(b), true
}

func (o object) array(key string) ([]any, bool) {
	v, ok := o.get(key)
	if !ok {
		return nil, false
	}
	a, isArr := v.([]any)
	if !isArr {
		o.failf(key, "not an array")
		return nil, false
	}
	return a, true
}

func (o object) sub(key string) (object, bool) {
	v, ok := o.get(key)
	if !ok {
		return object{}, false
	}
	return o.r.object(o.name+"."+key, v), true
}

func hexString(b []byte) string { return "0x" + hex.EncodeToString(b) }

// field is one key and value of an output event or a generated trace line;
// a slice of them keeps the order FORMAT.md's tables list them in.
type field struct {
	key string
	val any
}

type ordered []field

func (o ordered) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(strconv.Quote(f.key)) // keys are plain ASCII names
		buf.WriteByte(':')
		// Numbers, the most common values, skip the encoder: it is slow to
		// start for one value.
		switch v := f.val.(type) {
		case int:
			buf.WriteString(strconv.Itoa(v))
		case uint64:
			buf.WriteString(strconv.FormatUint(v, 10))
		default:
			b, err := marshal(v)
			if err != nil {
				return nil, err
			}
			buf.Write(b)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping, so that handler names and
// payload texts read as written.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
