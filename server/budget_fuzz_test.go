package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// structure counts, the slow way, what decodeBudget charges for a valid
// JSON text: its objects and arrays, and the separators between the
// elements of each (an object's members, an array's values).
func structure(t *testing.T, doc []byte) (containers, separators int64) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	type frame struct {
		object bool
		n      int64 // elements so far
		key    bool  // an object's next token is a key
	}
	var stack []*frame
	element := func() { // a value (or a key) starts in the innermost container
		if len(stack) == 0 {
			return
		}
		f := stack[len(stack)-1]
		if !f.object || f.key {
			f.n++
		}
		if f.object {
			f.key = !f.key
		}
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return containers, separators
		}
		if err != nil {
			t.Fatalf("token walk of a valid document: %v", err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			element()
			containers++
			stack = append(stack, &frame{object: tok == json.Delim('{'), key: true})
		case json.Delim('}'), json.Delim(']'):
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if f.n > 1 {
				separators += f.n - 1
			}
		default:
			element()
		}
	}
}

// FuzzDecodeBudget checks the decoded-size budget's scanner: the charge
// does not depend on how the body is split into reads, it is exactly the
// containers and separators of a valid document, and reading fails with
// a *DecodedSizeError exactly when the charge passes the limit.
func FuzzDecodeBudget(f *testing.F) {
	for _, s := range []string{`{}`, `{"input":[{},{},{}]}`, `[1,2,[3,"a,b[c"],{"k":"v\"}","l":[]}]`,
		`"\\"`, `{"a":"\\\"[",  "b" : [ 1 , 2 ] }`, `[[[[[]]]]]`, `not json {[,`} {
		f.Add([]byte(s), uint16(3), uint32(64))
	}
	f.Fuzz(func(t *testing.T, doc []byte, split uint16, limit uint32) {
		whole := (&decodeBudget{}).scan(doc)
		at := int(split) % (len(doc) + 1)
		parts := &decodeBudget{}
		if got := parts.scan(doc[:at]) + parts.scan(doc[at:]); got != whole {
			t.Fatalf("split at %d: charge %d, in one piece %d", at, got, whole)
		}
		if json.Valid(doc) {
			c, s := structure(t, doc)
			if want := c*containerCost + s*elementCost; whole != want {
				t.Fatalf("charge %d; %d containers and %d separators make %d", whole, c, s, want)
			}
		}
		b := &decodeBudget{r: iotest.OneByteReader(bytes.NewReader(doc)), limit: int64(limit)}
		_, err := io.ReadAll(b)
		var sizeErr *DecodedSizeError
		over := int64(len(doc))+whole > int64(limit)
		if errors.As(err, &sizeErr) != over {
			t.Fatalf("charge %d+%d against limit %d: err %v", len(doc), whole, limit, err)
		}
	})
}

// BenchmarkDecodeBudget is what the budget adds to decoding a typical
// /verify body: one pass over its bytes.
func BenchmarkDecodeBudget(b *testing.B) {
	body := []byte(`{"responses_create_params":{"input":[{"role":"user","content":"What is 1 + 1?"}]},"task_id":"wrk-1","expected_answer":"2","response":{"id":"resp_1","object":"response","created_at":1767225600,"model":"gym-policy","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"The answer is 2.","annotations":[]}]}],"parallel_tool_calls":true,"tool_choice":"auto","tools":[]}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		d := decodeBudget{r: bytes.NewReader(body), limit: DefaultMaxDecodedBytes}
		_, _ = io.Copy(io.Discard, &d)
	}
}
