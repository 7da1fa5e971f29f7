package server

import (
	"bytes"
	"fmt"
	"io"
)

// What decodeBudget charges, besides one byte per byte read, for what
// decoding a JSON body costs. A body's bytes say little about that: 8 MiB
// of `{},` elements is 2.8 million objects, and the protocol decoder
// allocates about 1.1 KiB per object of a valid input item and up to
// 4.7 KiB per `{}` item (its two validation errors and their answer
// included), as TestDecodedBombIs413 measures. Each object or array is
// charged containerCost and each element separator elementCost (an
// interface, string header or map entry), so the charge stays above what
// decoding a body allocates.
const (
	containerCost = 4096
	elementCost   = 32
)

// DecodedSizeError is what a body whose estimated decoded size passed the
// limit fails with; the runtime answers it 413.
type DecodedSizeError struct {
	// Limit is the budget, in estimated decoded bytes.
	Limit int64
}

func (e *DecodedSizeError) Error() string {
	return fmt.Sprintf("request body would decode to more than %d bytes", e.Limit)
}

// decodeBudget reads a JSON text and charges each chunk, as it arrives,
// for what it will decode to (see containerCost), failing with a
// *DecodedSizeError once the charge passes the limit: the decoder, which
// reads the whole value before building any Go value, never starts on a
// body that would blow up. It follows strings (and escapes in them)
// across chunks, so brackets and commas inside strings cost nothing;
// malformed JSON is the decoder's to reject.
type decodeBudget struct {
	r      io.Reader
	limit  int64
	cost   int64
	inStr  bool
	escape bool
}

func (b *decodeBudget) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.cost += int64(n) + b.scan(p[:n])
		if b.cost > b.limit {
			return n, &DecodedSizeError{Limit: b.limit}
		}
	}
	return n, err
}

// scan returns the charge of p beyond its length, carrying the string
// state over to the next chunk. Inside a string it jumps from quote to
// backslash with bytes.IndexByte, so text costs little.
func (b *decodeBudget) scan(p []byte) int64 {
	var cost int64
	inStr, escape := b.inStr, b.escape
	for i := 0; i < len(p); i++ {
		if inStr {
			if escape {
				escape = false
				continue
			}
			rest := p[i:]
			q := bytes.IndexByte(rest, '"')
			if q < 0 {
				q = len(rest)
			}
			if bs := bytes.IndexByte(rest[:q], '\\'); bs >= 0 {
				i += bs
				escape = true
				continue
			}
			i += q // the closing quote, or the end of p
			inStr = q == len(rest)
			continue
		}
		switch p[i] {
		case '"':
			inStr = true
		case '{', '[':
			cost += containerCost
		case ',':
			cost += elementCost
		}
	}
	b.inStr, b.escape = inStr, escape
	return cost
}
