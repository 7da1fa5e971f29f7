package otlpenc

import (
	"bytes"
	"context"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gymlens/gymlens/lens/internal/tracer"
)

// FuzzEncodeMatchesTheSDKExporter builds spans from arbitrary names, keys
// and values and holds the encoder's protobuf, byte for byte once
// marshalled (so NaN compares equal to itself), to the SDK exporter's, with
// the encoder warmed on a previous batch so reused objects are exercised.
func FuzzEncodeMatchesTheSDKExporter(f *testing.F) {
	f.Add("POST /verify", "http.route", "/verify", int64(200), 0.5, true, uint8(5), uint8(1), uint8(2))
	f.Add("", "", "\xff\xfe", int64(-1), -0.0, false, uint8(0), uint8(0), uint8(0))
	f.Add("ünï ✓", "k", "v\x00", int64(1<<62), 1e300, true, uint8(200), uint8(140), uint8(1))
	f.Fuzz(func(t *testing.T, name, key, sval string, ival int64, fval float64, bval bool, nattrs, nevents, status uint8) {
		var c collect
		p := tracer.NewProvider(resource.NewSchemaless(attribute.String("service.name", sval)), &c)
		tr := p.Tracer(name)
		t0 := time.Unix(1700000000, ival&0xffff)
		_, s := tr.Start(context.Background(), name, trace.WithTimestamp(t0), trace.WithSpanKind(trace.SpanKind(status%7)))
		for i := range int(nattrs) {
			k := attribute.Key(key + string(rune('a'+i%26)))
			switch i % 5 {
			case 0:
				s.SetAttributes(k.String(sval))
			case 1:
				s.SetAttributes(k.Int64(ival + int64(i)))
			case 2:
				s.SetAttributes(k.Float64(fval))
			case 3:
				s.SetAttributes(k.Bool(bval))
			case 4:
				s.SetAttributes(k.StringSlice([]string{sval, name}))
			}
		}
		for i := range int(nevents) {
			s.AddEvent(name, trace.WithTimestamp(t0.Add(time.Duration(i))), trace.WithAttributes(attribute.String(key, sval)))
		}
		s.SetStatus(codes.Code(status%3), sval)
		s.End(trace.WithTimestamp(t0.Add(time.Millisecond)))

		var e Encoder
		e.Encode(batch(t, 2)) // leave other objects behind to be reused
		got := marshal(t, e.Encode(c))
		if !utf8.ValidString(name) || !utf8.ValidString(key) || !utf8.ValidString(sval) {
			return // the SDK exporter cannot marshal these; the encoder repairs them (above)
		}
		want := marshal(t, sdkMapping(t, c))
		if !bytes.Equal(got, want) {
			t.Fatalf("encoder and SDK exporter disagree for name %q key %q value %q", name, key, sval)
		}
	})
}

func marshal(t *testing.T, rs []*tracepb.ResourceSpans) []byte {
	t.Helper()
	var out []byte
	for _, r := range rs {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}
