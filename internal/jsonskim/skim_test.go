package jsonskim

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestObjectAndArrayAgreeWithEncodingJSON holds the outline read by
// Object and Array to what encoding/json decodes from the same text,
// over values with nesting, escapes, white space and every literal.
func TestObjectAndArrayAgreeWithEncodingJSON(t *testing.T) {
	for _, doc := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":1,"b":[1,2,{"c":"}]\"\\"}],"d":null,"e":true,"f":false,"g":-1.5e3}`,
		"{\n\t\"x\" : \"a\\\\\" ,\r\n \"y\":{\"z\":[[],{}]} }", `{"esc\"aped":"v","u\u00e9":"\u00e9"}`,
	} {
		members, ok := Object([]byte(doc))
		if !ok {
			t.Fatalf("Object(%s) not ok", doc)
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatal(err)
		}
		if len(members) != len(want) {
			t.Fatalf("%s: %d members, want %d", doc, len(members), len(want))
		}
		for _, m := range members {
			var key string
			if err := json.Unmarshal(append(append([]byte{'"'}, m.Key...), '"'), &key); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.Value, want[key]) {
				t.Errorf("%s: member %q = %s, want %s", doc, key, m.Value, want[key])
			}
			if m.Escaped() != bytes.Contains(m.Key, []byte(`\`)) {
				t.Errorf("%s: %q Escaped() = %v", doc, m.Key, m.Escaped())
			}
		}
	}
	for _, doc := range []string{`[]`, ` [ 1 , "a,b" , {"k":[1]} , [ ] , null ] `, `[{"a":"]"}]`} {
		elems, ok := Array([]byte(doc))
		if !ok {
			t.Fatalf("Array(%s) not ok", doc)
		}
		var want []json.RawMessage
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatal(err)
		}
		if len(elems) != len(want) {
			t.Fatalf("%s: %d elements, want %d", doc, len(elems), len(want))
		}
		for i := range elems {
			if !bytes.Equal(elems[i], want[i]) {
				t.Errorf("%s: element %d = %s, want %s", doc, i, elems[i], want[i])
			}
		}
	}
}

// TestBrokenOutlines are refused.
func TestBrokenOutlines(t *testing.T) {
	for _, doc := range []string{``, `[]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":"x}`, `{"a":[1}`, `{"a":1} x`, `{"a":1 "b":2}`, `{a:1}`} {
		if _, ok := Object([]byte(doc)); ok {
			t.Errorf("Object(%q) ok", doc)
		}
	}
	for _, doc := range []string{``, `{}`, `[`, `[1,]`, `[1 2]`, `["a]`, `[[1]`, `[1]]`} {
		if _, ok := Array([]byte(doc)); ok {
			t.Errorf("Array(%q) ok", doc)
		}
	}
}

// TestCompleteAggregateMetrics passes exactly upstream's five members,
// each once, of the right kinds.
func TestCompleteAggregateMetrics(t *testing.T) {
	full := `{"group_level_metrics":[],"agent_metrics":{},"key_metrics":{},"perf_summary":null,"repeat_level_metrics":[]}`
	if !CompleteAggregateMetrics([]byte(full)) {
		t.Errorf("%s refused", full)
	}
	if s := `{"group_level_metrics":[{}],"agent_metrics":{"a":1},"key_metrics":{},"perf_summary":{"b":2},"repeat_level_metrics":[]}`; !CompleteAggregateMetrics([]byte(s)) {
		t.Errorf("%s refused", s)
	}
	for _, s := range []string{
		`{"agent_metrics":{},"key_metrics":{},"perf_summary":null,"repeat_level_metrics":[]}`,
		`{"group_level_metrics":null,"agent_metrics":{},"key_metrics":{},"perf_summary":null,"repeat_level_metrics":[]}`,
		`{"group_level_metrics":[],"agent_metrics":{},"agent_metrics":{},"perf_summary":null,"repeat_level_metrics":[]}`,
		`{"group_level_metrics":[],"agent_metrics":{},"key_metrics":{},"perf_summary":null,"other":[]}`,
		`{"group_level_metrics":[],"agent_metrics":[],"key_metrics":{},"perf_summary":null,"repeat_level_metrics":[]}`,
		`[]`,
	} {
		if CompleteAggregateMetrics([]byte(s)) {
			t.Errorf("%s passed", s)
		}
	}
}
