// Package jsonstr writes a Go string as a JSON string, byte for byte as
// encoding/json writes it, for the encoders that build JSON by appending
// (the wire codecs, the telemetry file's direct span encoder) rather than
// through reflection. It is the module's one JSON string escaper; its two
// rules are encoding/json's two.
package jsonstr

import "unicode/utf8"

// Append appends s as a JSON string the way json.Marshal writes it: '"',
// '\\' and control characters escaped (\b, \f, \n, \r, \t by name, the
// rest as \u00XX), the HTML characters <, > and & escaped as \u003c,
// \u003e and \u0026, U+2028 and U+2029 escaped, and each byte of invalid
// UTF-8 replaced by \ufffd.
func Append(dst []byte, s string) []byte { return appendString(dst, s, &htmlSafe) }

// AppendNoHTMLEscape appends s as a JSON string the way a json.Encoder
// with SetEscapeHTML(false) writes it: as Append, but <, > and & are
// written as they are.
func AppendNoHTMLEscape(dst []byte, s string) []byte { return appendString(dst, s, &safe) }

// safe and htmlSafe say which ASCII bytes are copied as they are: every
// printable byte other than '"' and '\\', and for htmlSafe none of <, >
// and & either.
var safe, htmlSafe = func() (s, h [utf8.RuneSelf]bool) {
	for c := range utf8.RuneSelf {
		s[c] = c >= 0x20 && c != '"' && c != '\\'
		h[c] = s[c] && c != '<' && c != '>' && c != '&'
	}
	return s, h
}()

const hex = "0123456789abcdef"

func appendString(dst []byte, s string, ok *[utf8.RuneSelf]bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if ok[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
