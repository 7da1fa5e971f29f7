package lens

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Attrs gathers a span's attributes so that they reach the span in one
// SetAttributes call, usually just before it ends. The SDK's span keeps its
// attributes in a slice that it grows on every call, as append does, and
// copies once more when the span ends; a span filled by five calls
// allocates several times what one call of the same attributes does, and
// each variadic call allocates its own argument slice on top. Attrs come
// from a pool: get one with NewAttrs, Add to it, and hand it back with
// SetOn (or Release, to drop what it holds).
//
// Nothing reads a span's attributes before it ends (the run-directory and
// OTLP exporters see ended spans), so the exported span is the same as if
// every attribute had been set as soon as it was known.
type Attrs struct {
	kv []attribute.KeyValue
}

// attrsCap is a new Attrs' capacity: more than the largest span of the
// fleet carries, so a pooled one never grows.
const attrsCap = 16

var attrsPool = sync.Pool{New: func() any {
	return &Attrs{kv: make([]attribute.KeyValue, 0, attrsCap)}
}}

// NewAttrs returns an empty Attrs from the pool.
func NewAttrs() *Attrs { return attrsPool.Get().(*Attrs) }

// Add appends kv. It keeps nothing of the argument slice, so a call with
// literal arguments allocates none.
func (a *Attrs) Add(kv ...attribute.KeyValue) { a.kv = append(a.kv, kv...) }

// Len is the number of attributes gathered so far.
func (a *Attrs) Len() int { return len(a.kv) }

// SetOn sets every gathered attribute on span in one call and returns a
// to the pool: a must not be used afterwards. A nil span only releases a.
func (a *Attrs) SetOn(span trace.Span) {
	if span != nil && len(a.kv) > 0 {
		// The SDK copies the values into the span and keeps no
		// reference to the slice.
		span.SetAttributes(a.kv...)
	}
	a.Release()
}

// Release returns a to the pool without setting anything; a must not be
// used afterwards.
func (a *Attrs) Release() {
	if cap(a.kv) > 4*attrsCap {
		return // grown by an unusual span: let it go rather than pool it
	}
	clear(a.kv) // drop the strings' and slices' references
	a.kv = a.kv[:0]
	attrsPool.Put(a)
}
