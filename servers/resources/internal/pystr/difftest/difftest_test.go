package difftest

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	ok := func(fields string) Verdict {
		var f map[string]json.RawMessage
		if err := json.Unmarshal([]byte(fields), &f); err != nil {
			t.Fatal(err)
		}
		return Verdict{Status: StatusOK, Fields: f}
	}
	cases := make([]Case, 8)
	verdicts := []Verdict{
		ok(`{"reward": 1.0, "extracted_answer": "A"}`),
		ok(`{"reward": 0.3333333333333333, "extracted_answer": null}`),
		{Status: StatusInvalid, Exception: "1 validation error"},
		{Status: StatusCrash, Exception: "AttributeError"},
		ok(`{"reward": 1.0, "extracted_answer": "A"}`),
		ok(`{"reward": 0.5}`),
		{Status: StatusInvalid},
		{Status: StatusCrash, Exception: "KeyError"},
	}
	answers := []Answer{
		{200, []byte(`{"reward": 1, "extracted_answer": "A", "extra": 1}`)},
		{200, []byte(`{"reward": 0.33333333333333337, "extracted_answer": null}`)},
		{422, []byte(`{"detail": []}`)},
		{200, []byte(`{"reward": 0}`)},
		{200, []byte(`{"reward": 1, "extracted_answer": "B"}`)},
		{500, []byte(`"boom"`)},
		{200, []byte(`{"reward": 0}`)},
		{200, []byte(`{"reward": 0}`)},
	}
	tally := Compare(cases, verdicts, answers, "AttributeError")
	if tally.Cases != 8 || tally.Agree != 3 || tally.Refused != 1 || tally.Crashed() != 1 || len(tally.Disagreements) != 4 {
		t.Fatalf("tally %+v", tally)
	}
	for i, want := range []string{"case 4: extracted_answer \"B\"", "case 5: upstream scored", "case 6: upstream refused",
		"case 7: upstream raised KeyError"} {
		if !strings.HasPrefix(tally.Disagreements[i], want) {
			t.Errorf("disagreement %d = %q, want %q...", i, tally.Disagreements[i], want)
		}
	}
	if got := tally.CrashSummary(); got != "AttributeError 1" {
		t.Errorf("CrashSummary = %q", got)
	}
}

func TestObjectKeepsOrder(t *testing.T) {
	b, err := json.Marshal(Object{{"b", 1}, {"a", nil}, {"b", "x"}})
	if err != nil || string(b) != `{"b":1,"a":null,"b":"x"}` {
		t.Fatalf("%s %v", b, err)
	}
}

func TestGenIsSeeded(t *testing.T) {
	a, b := NewGen(7), NewGen(7)
	for range 50 {
		if x, y := a.Words(5)+a.Exotic(), b.Words(5)+b.Exotic(); x != y {
			t.Fatalf("%q != %q", x, y)
		}
	}
}
