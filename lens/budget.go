package lens

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// MaxExportRequestBytes is the most a span export request to a collector
// is estimated to hold: 3.5 MiB, under the 4 MiB an OpenTelemetry
// Collector's gRPC receiver (and a gRPC server's default) accepts, with
// half a MiB left for the resource, which is sent once per request and
// not truncated, and for the estimate's error.
const MaxExportRequestBytes = 3584 << 10

// budgetExporter sends a batch in as many requests as it takes to keep
// each under a byte budget, so that no batch can exceed a collector's
// message limit whatever its spans carry. The attribute value limit (see
// KeyAttributeValueLengthLimit) keeps any one span small; this keeps the
// sum small. A span estimated above the budget on its own is sent alone:
// if the collector refuses it, only that span is lost.
//
// A failed request does not stop the others; the error returned then is a
// *lossError counting the spans of the failed requests.
type budgetExporter struct {
	sdktrace.SpanExporter
	budget int
}

func (b budgetExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	var (
		errs  []error
		lost  int
		start int
		size  int
	)
	send := func(end int) {
		if end == start {
			return
		}
		if err := b.SpanExporter.ExportSpans(ctx, spans[start:end]); err != nil {
			errs = append(errs, err)
			lost += end - start
		}
		start, size = end, 0
	}
	for i, sp := range spans {
		n := estimateSpanBytes(sp)
		if size+n > b.budget {
			send(i)
		}
		size += n
	}
	send(len(spans))
	if len(errs) == 0 {
		return nil
	}
	err := errors.Join(errs...)
	if lost < len(spans) {
		err = fmt.Errorf("%d of %d spans in failed requests: %w", lost, len(spans), err)
	}
	return &lossError{lost: lost, err: err}
}

// Per-item overheads of the estimate, generous against the protobuf
// encoding (tags, lengths, ids, times, kind, status).
const (
	spanOverheadBytes  = 128
	eventOverheadBytes = 32
	linkOverheadBytes  = 64
	attrOverheadBytes  = 16
)

// estimateSpanBytes is an upper estimate of a span's size in an OTLP
// request, from the lengths of what it carries.
func estimateSpanBytes(s sdktrace.ReadOnlySpan) int {
	n := spanOverheadBytes + len(s.Name()) + len(s.Status().Description) + attrsBytes(s.Attributes())
	for _, e := range s.Events() {
		n += eventOverheadBytes + len(e.Name) + attrsBytes(e.Attributes)
	}
	for _, l := range s.Links() {
		n += linkOverheadBytes + attrsBytes(l.Attributes)
	}
	return n
}

func attrsBytes(kvs []attribute.KeyValue) int {
	n := 0
	for _, kv := range kvs {
		n += attrOverheadBytes + len(kv.Key) + valueBytes(kv.Value)
	}
	return n
}

func valueBytes(v attribute.Value) int {
	switch v.Type() {
	case attribute.STRING:
		return len(v.AsString())
	case attribute.BYTESLICE:
		return len(v.AsByteSlice())
	case attribute.STRINGSLICE:
		n := 0
		for _, s := range v.AsStringSlice() {
			n += 8 + len(s)
		}
		return n
	case attribute.BOOLSLICE:
		return 4 * len(v.AsBoolSlice())
	case attribute.INT64SLICE:
		return 12 * len(v.AsInt64Slice())
	case attribute.FLOAT64SLICE:
		return 12 * len(v.AsFloat64Slice())
	case attribute.SLICE:
		n := 0
		for _, e := range v.AsSlice() {
			n += 8 + valueBytes(e)
		}
		return n
	case attribute.MAP:
		return attrsBytes(v.AsMap())
	default:
		return 12
	}
}
