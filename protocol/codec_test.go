package protocol

// Tests of codec.go.

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

// The package's own string and number codecs agree with encoding/json.
func TestCodecsMatchEncodingJSON(t *testing.T) {
	strs := []string{"", "plain", "quote\" back\\slash /", "<a href='x'>&amp;</a>", "tab\tnl\ncr\r\b\f\x00\x01\x1f\x7f",
		"é ✓ 日本語 🇫🇷", "\u2028\u2029", "bad \xff\xfe utf8 \xc3", "\xed\xa0\x80 lone surrogate bytes", strings.Repeat("x", 300)}
	for i := range 2000 {
		b := make([]byte, i%40)
		for j := range b {
			b[j] = byte((i*131 + j*71) % 256)
		}
		strs = append(strs, string(b))
	}
	for _, s := range strs {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
		var back string
		noErr(t, json.Unmarshal(want, &back))
		if got, err := decodeString(want); err != nil || got != back {
			t.Fatalf("decodeString(%s) = %q, %v; want %q", want, got, err, back)
		}
	}
	for _, raw := range []string{`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00\ud83d"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"\u00e9\/\"\\"`, `"\uD83D\uDE00"`} {
		var want string
		noErr(t, json.Unmarshal([]byte(raw), &want))
		if got, err := decodeString([]byte(raw)); err != nil || got != want {
			t.Fatalf("decodeString(%s) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, f := range []float64{0, 1, -1, 0.5, 1.0 / 3, 1e-6, 1e-7, 123456789, 1e20, 1e21, 1.5e300, -2.5e-10, 5e-324, 1767225600.5} {
		want, _ := json.Marshal(f)
		if got := AppendJSONFloat(nil, f); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSONFloat(%v) = %s, want %s", f, got, want)
		}
	}
	// Numbers decode as encoding/json decodes them, errors included.
	for _, raw := range []string{"0", "-3", "12", "1.5", "1e3", "99999999999999999999", "-0"} {
		var wantI, gotI int
		wantErr := json.Unmarshal([]byte(raw), &wantI)
		gotErr := decodeValue([]byte(raw), reflect.ValueOf(&gotI).Elem())
		if gotI != wantI || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("int %s: %d %v, want %d %v", raw, gotI, gotErr, wantI, wantErr)
		}
		var wantF, gotF float64
		wantErr = json.Unmarshal([]byte(raw), &wantF)
		gotErr = decodeValue([]byte(raw), reflect.ValueOf(&gotF).Elem())
		if gotF != wantF || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("float %s: %v %v, want %v %v", raw, gotF, gotErr, wantF, wantErr)
		}
	}
	// A raw member that is not valid JSON is an encoding error, as with encoding/json.
	if _, err := json.Marshal(Tool{Type: "function", Name: "f", Parameters: json.RawMessage(`{oops`)}); err == nil {
		t.Fatal("invalid raw parameters encoded")
	}
	if _, err := json.Marshal(Response{Temperature: ptr(math.NaN())}); err == nil {
		t.Fatal("NaN encoded")
	}
	// A multi-line raw member set in Go goes out on one line.
	out := marshal(t, Tool{Type: "function", Name: "f", Parameters: json.RawMessage("{\n \"type\": \"object\"\n}")})
	if direct, _ := (Tool{Type: "function", Name: "f", Parameters: json.RawMessage("{\n \"type\": \"object\"\n}")}).MarshalJSON(); bytes.ContainsAny(direct, "\n") || bytes.ContainsAny(out, "\n") {
		t.Fatalf("multi-line: %s", direct)
	}
}
