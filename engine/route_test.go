package engine

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRoute(t *testing.T) {
	tests := []struct {
		payload string
		routed  bool
		handler string
		body    string
	}{
		{`{"_handler":"settle","_payload":"aGVsbG8="}`, true, "settle", "hello"},
		{`{"_handler":"settle","_payload":""}`, true, "settle", ""},
		{` {"_payload":"aGk=", "_handler" : "h" } `, true, "h", "hi"},
		{`{"_handler":"h","_payload":"aGk=","n":-1.5e3,"t":true,"f":false,"z":null,"a":[{"b":"}"}]}`, true, "h", "hi"},
		{`{"a":"]","_handler":"h","_payload":"aGk="}`, true, "h", "hi"},
		{`{"_handler":"","_payload":"aGk="}`, true, "", "hi"},
		{`{"_handler":"settle","_payload":"aGVsbG8"}`, false, "", ""},
		{`{"_handler":"settle","_payload":"aGVs-G8="}`, false, "", ""},
		{`{"_handler":"settle"}`, false, "", ""},
		{`{"_payload":"aGk="}`, false, "", ""},
		{`{"_handler":7,"_payload":"aGk="}`, false, "", ""},
		{`{"_handler":"h","_payload":7}`, false, "", ""},
		{`["_handler","settle"]`, false, "", ""},
		{`hello`, false, "", ""},
		{``, false, "", ""},
		{`{"_handler":"h","_payload":"aGk="`, false, "", ""},
		{`{"_handler":"h","_payload":"a=Gk"}`, false, "", ""},
		{`{"_handler":"h","_payload":"aG=="}`, true, "h", "h"},
		{`{"_handler":"h","_payload":"a==="}`, false, "", ""},
		{"{\"_handler\":\"h\",\"_payload\":\"aGk=\"}\x00", false, "", ""},
		{`{"_handler":"h\u00e9","_payload":"aGk="}`, true, "hé", "hi"},
		{`{"_handler":"a","_handler":"b","_payload":"aGk="}`, true, "b", "hi"},
		{`{"_handler":"a","_payload":"aGk=","_payload":""}`, true, "a", ""},
		{"\t\r\n{\"_handler\":\"h\",\"_payload\":\"aGk=\"}", true, "h", "hi"},
		{"\v{\"_handler\":\"h\",\"_payload\":\"aGk=\"}", false, "", ""},
		{"\xef\xbb\xbf{\"_handler\":\"h\",\"_payload\":\"aGk=\"}", false, "", ""}, // a BOM is not JSON whitespace
	}
	var scratch []byte
	for _, tt := range tests {
		rt := route([]byte(tt.payload), &scratch)
		if rt.routed && !mayRoute([]byte(tt.payload)) {
			t.Errorf("%q: routed, but mayRoute says it cannot be", tt.payload)
		}
		if rt.routed != tt.routed {
			t.Errorf("%s: routed = %v, want %v", tt.payload, rt.routed, tt.routed)
			continue
		}
		if !rt.routed {
			if string(rt.body) != tt.payload {
				t.Errorf("%s: body %q, want the payload unchanged", tt.payload, rt.body)
			}
			continue
		}
		if string(rt.handler) != tt.handler || string(rt.body) != tt.body {
			t.Errorf("%s: got (%q, %q), want (%q, %q)", tt.payload, rt.handler, rt.body, tt.handler, tt.body)
		}
	}
}

func BenchmarkRoute(b *testing.B) {
	big := `{"_handler":"settle","_payload":"` + base64.StdEncoding.EncodeToString(make([]byte, 12<<10)) + `"}`
	for _, p := range []string{"", "\x01\x02\x03\x04", `{"_handler":"tick","_payload":""}`, `{"_handler":"settle","_payload":"aGVsbG8gd29ybGQ="}`, big} {
		b.Run(fmt.Sprintf("len=%d", len(p)), func(b *testing.B) {
			var scratch []byte
			payload := []byte(p)
			b.ReportAllocs()
			for b.Loop() {
				route(payload, &scratch)
			}
		})
	}
}

// referenceFields is routingFields written plainly with encoding/json.
func referenceFields(p []byte) (handler, payload []byte, ok bool) {
	i := skipSpace(p, 0)
	if i == len(p) || p[i] != '{' || !utf8.Valid(p) || !json.Valid(p) {
		return nil, nil, false
	}
	return routingFieldsEscaped(p)
}

// FuzzRoute checks the one-pass validator and extractor against
// encoding/json on arbitrary payloads.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{
		`{"_handler":"settle","_payload":"aGVsbG8="}`, `{"a":[1,2,{"b":null}],"_handler":"x","_payload":""}`,
		`{"_handler":"\u0041","_payload":"aGk="}`, `{"n":-0.5e+10}`, `{"n":01}`, `{"s":"\x"}`, `[{}]`, `{}`, ` {"a":"b"} `,
		`{"_handler":"a","_handler":"b","_payload":""}`, "{\"a\":\"\x01\"}", `{"a":tru}`, `{"a":1.}`, `{"a":"\ud800"}`,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		h, b, ok := routingFields(p)
		wh, wb, wok := referenceFields(p)
		if ok != wok || ok && (string(h) != string(wh) || string(b) != string(wb)) {
			t.Fatalf("%q: got (%q, %q, %v), encoding/json says (%q, %q, %v)", p, h, b, ok, wh, wb, wok)
		}
		// Schedule skips route where mayRoute is false.
		if ok && !mayRoute(p) {
			t.Fatalf("%q: a routing payload that mayRoute rules out", p)
		}
		// Validity of arbitrary objects must agree too, routing or not.
		if i := skipSpace(p, 0); i < len(p) && p[i] == '{' && utf8.Valid(p) {
			end, vok := scanValue(p, i, 1)
			vok = vok && skipSpace(p, end) == len(p)
			if vok != json.Valid(p) {
				t.Fatalf("%q: valid = %v, encoding/json says %v", p, vok, !vok)
			}
		}
	})
}

func TestDeepNesting(t *testing.T) {
	for _, d := range []int{9999, 10000, 10001} {
		p := []byte(`{"_handler":"h","_payload":"","x":` + strings.Repeat("[", d-1) + strings.Repeat("]", d-1) + "}")
		_, _, ok := routingFields(p)
		if ok != json.Valid(p) {
			t.Errorf("depth %d: routed = %v, json.Valid = %v", d, ok, json.Valid(p))
		}
	}
}

// strictPaddedBase64 is the byte-by-byte check isPaddedBase64 replaced:
// a multiple of 4 long, the alphabet only, '=' only as the last one or two
// characters.
func strictPaddedBase64(b []byte) bool {
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

// FuzzPaddedBase64: a _payload routes (isPaddedBase64, then a Decode
// without error) exactly when it is padded standard base64 by the strict
// check, and decodes to the same bytes.
func FuzzPaddedBase64(f *testing.F) {
	for _, s := range []string{"", "QQ==", "QQ==QQ==", "QQ=A", "Q===", "====", "QUJD", "QUJ=", "QU==",
		"QQ=\n", "QQ\r==", "QQ=", "QUJDRA==", "QUJDRA=", "AB+/", "AB-_", "QQ==\x00", "QUJD====", "aGVs\nbG8=", "QUJD\r\nQUJD"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var scratch []byte
		p, err := json.Marshal(map[string]string{"_handler": "h", "_payload": string(b)})
		if err != nil || !utf8.Valid(b) {
			return // not a JSON string value: routingFields's case, not this one
		}
		got := route(p, &scratch)
		want, werr := base64.StdEncoding.DecodeString(string(b))
		wok := strictPaddedBase64(b) && werr == nil
		if got.routed != wok || wok && !bytes.Equal(got.body, want) {
			t.Fatalf("%q: routed %v (%q), the strict check says %v (%q)", b, got.routed, got.body, wok, want)
		}
	})
}
