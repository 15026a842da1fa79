package tracemodel

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"regexp"
	"unicode/utf8"

	"golang.org/x/crypto/sha3"
)

// defaultHandler is the handler of every payload that does not route.
const defaultHandler = "handle_timer"

// base64RE is padded standard base64 as FORMAT.md wants it: a multiple of 4
// long, the standard alphabet, '=' only as the last one or two characters,
// no whitespace. Go's decoder alone would skip newlines.
var base64RE = regexp.MustCompile(`^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$`)

// Route applies FORMAT.md's handler routing to a schedule's payload: when the
// payload is one JSON object whose top-level `_handler` and `_payload` are
// strings, `_payload` being padded standard base64, the timer calls that
// handler with the decoded `_payload` (routed is true, whatever the handler's
// length: InvalidHandler is the caller's check). Any other payload calls
// handle_timer with the payload unchanged.
//
// Choices of SPEC §5 that this follows: keys match exactly after JSON
// unescaping; a repeated key counts with its last value; lone surrogate
// escapes decode to U+FFFD; base64 with non-zero padding bits is accepted;
// a JSON text nested too deep for encoding/json does not route.
func Route(payload []byte) (handler string, inner []byte, routed bool) {
	notRouted := func() (string, []byte, bool) { return defaultHandler, payload, false }
	// encoding/json would replace invalid UTF-8 with U+FFFD and go on.
	if !utf8.Valid(payload) {
		return notRouted()
	}
	var obj map[string]json.RawMessage // last value wins for a repeated key
	if err := json.Unmarshal(payload, &obj); err != nil || obj == nil {
		return notRouted() // not JSON, not one value, not an object (null too)
	}
	h, ok := jsonString(obj["_handler"])
	if !ok {
		return notRouted()
	}
	p, ok := jsonString(obj["_payload"])
	if !ok || !base64RE.MatchString(p) {
		return notRouted()
	}
	// StdEncoding accepts non-zero padding bits (SPEC §5); the pattern above
	// has already refused everything else it would be lenient about.
	decoded, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		return notRouted()
	}
	return h, decoded, true
}

// jsonString decodes raw when it is a JSON string. Unmarshal alone would
// accept null into a string and leave it empty.
func jsonString(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// TimerID is FORMAT.md's timer id: keccak256(actor[20] || height[8, big
// endian] || payload || nonce[8, big endian]), with Ethereum's legacy
// Keccak-256, payload as given to schedule (routing JSON included).
func TimerID(actor [20]byte, height uint64, payload []byte, nonce uint64) [32]byte {
	h := sha3.NewLegacyKeccak256()
	h.Write(actor[:])
	h.Write(binary.BigEndian.AppendUint64(nil, height))
	h.Write(payload)
	h.Write(binary.BigEndian.AppendUint64(nil, nonce))
	var id [32]byte
	h.Sum(id[:0])
	return id
}
