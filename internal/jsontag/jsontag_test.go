package jsontag

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

type inner struct {
	A int    `json:"a"`
	B string // untagged: named B
	C int    `json:"c,omitempty"`
}

type Deep struct {
	A int `json:"a"` // loses to outer.A (shallower)
	D int `json:"d"`
}

type Ptr struct {
	P int `json:"p"`
}

type tieTagged struct {
	X int `json:"X"`
}

type tieUntagged struct {
	X int
}

type Self struct {
	S int `json:"s"`
	*Self
}

type outer struct {
	inner
	*Ptr
	Deep `json:"deep"` // tagged: one member, not promoted
	// A is shallower than inner.A and wins.
	A       int `json:"a"`
	Skipped int `json:"-"`
	Dash    int `json:"-,"`
	hidden  int
	Named   int
}

type ties struct {
	tieTagged
	tieUntagged
	// Y is claimed by two untagged fields at one depth: dropped.
	tieY1
	tieY2
}

type tieY1 struct{ Y int }
type tieY2 struct{ Y int }

type promotedDeep struct {
	Deep
	A int `json:"a"`
}

// names returns the member names of Fields(t).
func names(t reflect.Type) []string {
	var out []string
	for _, f := range Fields(t) {
		out = append(out, f.Name)
	}
	return out
}

// marshalledKeys returns the members encoding/json writes for v, sorted.
func marshalledKeys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestAgreesWithEncodingJSON checks every member list against the keys
// encoding/json writes for a value with every field set.
func TestAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range []struct {
		v    any
		want []string // in field order
	}{
		{outer{inner: inner{1, "b", 3}, Ptr: &Ptr{4}, Deep: Deep{5, 6}, A: 7, Skipped: 8, Dash: 9, hidden: 10, Named: 11},
			[]string{"B", "c", "p", "deep", "a", "-", "Named"}},
		{ties{tieTagged{1}, tieUntagged{2}, tieY1{3}, tieY2{4}}, []string{"X"}},
		{promotedDeep{Deep{1, 2}, 3}, []string{"d", "a"}},
		{Self{S: 1, Self: &Self{S: 2}}, []string{"s"}},
	} {
		typ := reflect.TypeOf(c.v)
		got := names(typ)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: Fields names %v, want %v", typ, got, c.want)
		}
		sorted := slices.Sorted(slices.Values(got))
		if keys := marshalledKeys(t, c.v); !slices.Equal(sorted, keys) {
			t.Errorf("%s: Fields names %v, encoding/json writes %v", typ, sorted, keys)
		}
	}
	if Fields(reflect.TypeFor[int]()) != nil {
		t.Error("an int has members")
	}
	if got := names(reflect.TypeFor[*outer]()); len(got) != 7 {
		t.Errorf("a pointer to a struct: %v", got)
	}
}

func TestFieldFacts(t *testing.T) {
	fields := Fields(reflect.TypeFor[outer]())
	byName := map[string]Field{}
	for _, f := range fields {
		byName[f.Name] = f
	}
	if f := byName["c"]; !f.OmitEmpty || !f.Tagged || f.Type != reflect.TypeFor[int]() || !slices.Equal(f.Index, []int{0, 2}) {
		t.Errorf("c: %+v", f)
	}
	if f := byName["B"]; f.Tagged || f.OmitEmpty {
		t.Errorf("B: %+v", f)
	}
	if f := byName["p"]; !slices.Equal(f.Index, []int{1, 0}) || f.Tag.Get("json") != "p" {
		t.Errorf("p: %+v", f)
	}
}

// TestSettable decodes into a promoted field behind a nil embedded
// pointer, as encoding/json does.
func TestSettable(t *testing.T) {
	var v outer
	dst := reflect.ValueOf(&v).Elem()
	for _, f := range Fields(dst.Type()) {
		if f.Name == "p" {
			if err := json.Unmarshal([]byte("12"), Settable(dst, f.Index).Addr().Interface()); err != nil {
				t.Fatal(err)
			}
		}
	}
	var want outer
	if err := json.Unmarshal([]byte(`{"p":12}`), &want); err != nil {
		t.Fatal(err)
	}
	if v.Ptr == nil || v.Ptr.P != 12 || want.Ptr.P != 12 {
		t.Errorf("p set to %+v, encoding/json's %+v", v.Ptr, want.Ptr)
	}
}
