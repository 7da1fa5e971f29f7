package jsonstr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// strs are strings that exercise every escape, plus a spread of arbitrary
// bytes.
func strs() []string {
	out := []string{"", "plain", "quote\" back\\slash /", "<a href='x'>&amp;</a>", "tab\tnl\ncr\r\b\f\x00\x01\x1f\x7f",
		"é ✓ 日本語 🇫🇷", "\u2028\u2029 line seps", "bad \xff\xfe utf8 \xc3", "\xed\xa0\x80 lone surrogate bytes", strings.Repeat("x", 300)}
	for i := range 2000 {
		b := make([]byte, i%40)
		for j := range b {
			b[j] = byte((i*131 + j*71) % 256)
		}
		out = append(out, string(b))
	}
	return out
}

func TestAppendIsMarshal(t *testing.T) {
	for _, s := range strs() {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := Append([]byte("x"), s); !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Fatalf("Append(%q) = %s, json.Marshal %s", s, got[1:], want)
		}
	}
}

func TestAppendNoHTMLEscapeIsEncoder(t *testing.T) {
	for _, s := range strs() {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := AppendNoHTMLEscape(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendNoHTMLEscape(%q) = %s, the encoder %s", s, got, want)
		}
	}
}
