package fileexport

import (
	"encoding/base64"

	"go.opentelemetry.io/otel/attribute"

	"github.com/gymlens/gymlens/lens/telfile"
)

// attrMap converts key-value pairs to the format's attribute object. A later
// duplicate key overwrites an earlier one.
func attrMap(kvs []attribute.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = attrValue(kv.Value)
	}
	return m
}

// attrSet converts an attribute set (as used on metric points).
func attrSet(set attribute.Set) map[string]any {
	m := make(map[string]any, set.Len())
	for it := set.Iter(); it.Next(); {
		kv := it.Attribute()
		m[string(kv.Key)] = attrValue(kv.Value)
	}
	return m
}

// attrValue maps an attribute value to a JSON-encodable Go value. Scalars
// and homogeneous slices become JSON scalars and arrays; non-finite floats
// become the strings "NaN", "+Inf" and "-Inf". The richer kinds the API also
// allows are kept as faithfully as JSON permits: byte slices as base64
// strings, mixed slices as arrays, maps as nested objects and the empty value
// as null.
func attrValue(v attribute.Value) any {
	switch v.Type() {
	case attribute.BOOL:
		return v.AsBool()
	case attribute.INT64:
		return v.AsInt64()
	case attribute.FLOAT64:
		return telfile.JSONFloat(v.AsFloat64())
	case attribute.STRING:
		return v.AsString()
	case attribute.BOOLSLICE:
		return v.AsBoolSlice()
	case attribute.INT64SLICE:
		return v.AsInt64Slice()
	case attribute.FLOAT64SLICE:
		fs := v.AsFloat64Slice()
		out := make([]any, len(fs))
		for i, f := range fs {
			out[i] = telfile.JSONFloat(f)
		}
		return out
	case attribute.STRINGSLICE:
		return v.AsStringSlice()
	case attribute.BYTESLICE:
		return base64.StdEncoding.EncodeToString(v.AsByteSlice())
	case attribute.SLICE:
		vs := v.AsSlice()
		out := make([]any, len(vs))
		for i, e := range vs {
			out[i] = attrValue(e)
		}
		return out
	case attribute.MAP:
		return attrMap(v.AsMap())
	case attribute.EMPTY:
		return nil
	default:
		// A kind added to the API after this was written: keep its text.
		return v.String()
	}
}
