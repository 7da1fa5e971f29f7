package main

import (
	"encoding/json"
	"testing"
)

// FuzzRunIdentity checks the reader of a run directory's identity file on
// any bytes: it never panics; what it accepts matches itself, survives
// being written and read again, and differs from another seed.
func FuzzRunIdentity(f *testing.F) {
	for _, seed := range []string{
		`{"run_id":"x","command":"gymlens run","created_at":"2026-01-01T00:00:00Z","seed":1,"num_repeats":1,"dataset":{"source":"built-in","rows":3,"sha256":"ab"}}`,
		`{"command":"gymlens env start"}`,
		`{"command":"gymlens run"} {}`,
		`{"command":""}`,
		`{"command":"gymlens run","seed":null,"dataset":null}`,
		`[]`, ``, `{`, `{"command":"gymlens run","extra":true}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := parseRunIdentity(b)
		if err != nil {
			return
		}
		if d := id.mismatch(id); d != nil {
			t.Fatalf("an identity differs from itself: %q", d)
		}
		again, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseRunIdentity(again)
		if err != nil {
			t.Fatalf("%s: written identity unreadable: %v", again, err)
		}
		if d := id.mismatch(back); d != nil {
			t.Fatalf("identity changed by a round trip: %q", d)
		}
		other := id
		s := int64(1)
		if id.Seed != nil {
			s = *id.Seed + 1
		}
		other.Seed = &s
		if id.mismatch(other) == nil {
			t.Fatal("another seed matches")
		}
	})
}
