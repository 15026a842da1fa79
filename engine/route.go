package engine

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"
)

// routing is the result of reading a payload for handler routing (CIP-5
// §4.2, FORMAT.md): a payload that is one JSON object with a string
// _handler and a string _payload holding padded standard base64 routes to
// that handler with the decoded bytes; anything else goes to handle_timer
// unchanged.
type routing struct {
	routed  bool
	handler []byte // the decoded _handler (aliases the payload or scratch)
	body    []byte // what the handler receives
}

// route reads payload p. Decoded bytes are written to *scratch, which it
// reuses between calls; the result is valid until the next call.
func route(p []byte, scratch *[]byte) routing {
	raw := routing{body: p}
	h, b, ok := routingFields(p)
	if !ok || !isPaddedBase64(b) {
		return raw
	}
	n := base64.StdEncoding.DecodedLen(len(b))
	buf := (*scratch)[:0]
	if cap(buf) < n {
		buf = make([]byte, 0, n)
		*scratch = buf
	}
	m, err := base64.StdEncoding.Decode(buf[:n], b)
	if err != nil {
		return raw
	}
	return routing{routed: true, handler: h, body: buf[:m]}
}

// routingFields returns the decoded string values of the top-level keys
// _handler and _payload of p when p is valid UTF-8 holding exactly one JSON
// object in which both keys are strings. A repeated key counts with its last
// value, as in encoding/json, JavaScript and Python.
func routingFields(p []byte) (handler, payload []byte, ok bool) {
	i := skipSpace(p, 0)
	if i == len(p) || p[i] != '{' || !utf8.Valid(p) || !json.Valid(p) {
		return nil, nil, false
	}
	if bytes.IndexByte(p, '\\') >= 0 {
		return routingFieldsEscaped(p)
	}
	// p is a valid object without escapes, so a string runs to the next quote.
	var hs, ps bool
	i++
	for {
		i = skipSpace(p, i)
		if p[i] == '}' {
			break
		}
		j := bytes.IndexByte(p[i+1:], '"') + i + 1
		key := p[i+1 : j]
		i = skipSpace(p, j+1) + 1 // past ':'
		i = skipSpace(p, i)
		end := skipValue(p, i)
		isStr := p[i] == '"'
		switch string(key) {
		case "_handler":
			hs, handler = isStr, p[i+1:max(i+1, end-1)]
		case "_payload":
			ps, payload = isStr, p[i+1:max(i+1, end-1)]
		}
		i = skipSpace(p, end)
		if p[i] == '}' {
			break
		}
		i++ // past ','
	}
	return handler, payload, hs && ps
}

// routingFieldsEscaped is the rare path for payloads with escapes: decode
// with encoding/json, matching the keys exactly.
func routingFieldsEscaped(p []byte) (handler, payload []byte, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(p, &m) != nil {
		return nil, nil, false
	}
	var h, b string
	hr, ok1 := m["_handler"]
	pr, ok2 := m["_payload"]
	if !ok1 || !ok2 || hr[0] != '"' || pr[0] != '"' || json.Unmarshal(hr, &h) != nil || json.Unmarshal(pr, &b) != nil {
		return nil, nil, false
	}
	return []byte(h), []byte(b), true
}

func skipSpace(p []byte, i int) int {
	for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the valid JSON value at p[i] (no escapes).
func skipValue(p []byte, i int) int {
	depth := 0
	for ; i < len(p); i++ {
		switch p[i] {
		case '"':
			i += bytes.IndexByte(p[i+1:], '"') + 1
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// isPaddedBase64 reports whether b is standard base64 (RFC 4648 §4) with
// '=' padding: a multiple of 4 long, the alphabet only, and '=' only as the
// last one or two characters. Decoding then cannot skip anything, unlike
// encoding/base64, which ignores newlines.
func isPaddedBase64(b []byte) bool {
	if len(b)%4 != 0 {
		return false
	}
	pad := 0
	if len(b) > 0 && b[len(b)-1] == '=' {
		pad = 1
		if b[len(b)-2] == '=' {
			pad = 2
		}
	}
	for _, c := range b[:len(b)-pad] {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/') {
			return false
		}
	}
	return true
}
