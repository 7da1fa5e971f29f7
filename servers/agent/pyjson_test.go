package agent_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gymlens/gymlens/internal/upstream"
	"github.com/gymlens/gymlens/servers/agent"
)

// loadsProgram prints, for each string read from stdin, the output
// upstream's simple agent gives a function call with those arguments when
// json.loads refuses them ({"error": ...}), "" when it accepts them, or
// "other: <exception>" for a failure that is not a JSONDecodeError.
const loadsProgram = `
import json, sys
out = []
for s in json.load(sys.stdin):
    try:
        json.loads(s)
        out.append("")
    except json.JSONDecodeError as e:
        out.append(json.dumps({"error": f"Invalid tool call arguments: {e!r}"}))
    except Exception as e:
        out.append("other: " + type(e).__name__)
print(json.dumps(out))
`

// argumentFragments are the pieces argument strings are made of: JSON
// tokens, broken tokens, white space, escapes and non-ASCII text.
var argumentFragments = []string{
	`{`, `}`, `[`, `]`, `,`, `:`, `"`, `"k"`, `"v"`, ` `, "\n", "\t", "\r", `\`, `\"`, `\n`, `\u00e9`,
	`\ud83d\ude00`, `\ud800`, `\udc00`, `\u12`, `\x`, `\uZZZZ`, `0`, `1`, `-`, `.`, `5`, `e`, `E`, `+`, `12.5e-3`,
	`01`, `-0`, `true`, `tru`, `false`, `fals`, `null`, `nul`, `NaN`, `Infinity`, `-Infinity`, `Inf`, `é`, `😀`,
	"\x01", "\x1f", "\ufeff", `{"a": 1}`, `[1, 2]`, `{"a": [1, {"b": null}]}`, `'`, `x`,
}

// TestUpstreamJSONErrors: the error output the Go agent writes for
// arguments that do not parse is, byte for byte, what upstream's agent
// writes (Python's JSONDecodeError repr), and the arguments Python
// accepts are the ones it accepts: hand-picked cases and a few thousand
// strings made of fragments, run through CPython's json.loads.
func TestUpstreamJSONErrors(t *testing.T) {
	upstream.Python(t) // skips the test where upstream is not installed
	cases := []string{
		``, ` `, `{`, `}`, `[`, `]`, `{"city": `, `{"city": "SF"`, `{"city": "SF",}`, `[1,]`, `[1 2]`,
		`{"a" 1}`, `{'a': 1}`, `{a: 1}`, `{"a": 1} x`, `{"a": 1}}`, `"abc`, `"a\qb"`, `"\u12"`, `"\u12G4"`,
		`"\ud800\u12"`, `"\ud800\uZZZZ"`, `"\ud800\udc00"`, "\"a\x01b\"", "\ufeff{}", `NaN`, `-Infinity`,
		`[NaN, Infinity]`, `-`, `-x`, `1.`, `1.e5`, `1e`, `1e+`, `01`, `.5`, `+1`, `tru`, `nul`, `"é`, "{\n\"a\":\n}",
		"[1,\n2,\n", `{"a":1,"b"}`, `{"a":1,"b":}`, `{"a":1,,}`, `[,]`, `{,}`, `"\`, `"\u0041`, `"\u0041"`,
		`{"é": x}`, "😀😀 {", `{"k": "v"} `, `{"k": "\"}`, `{"k": "\\"}`, `[[[[`, `[[]]]`,
	}
	rng := rand.New(rand.NewPCG(7, 39))
	for range 3000 {
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			b.WriteString(argumentFragments[rng.IntN(len(argumentFragments))])
		}
		cases = append(cases, b.String())
	}
	stdin, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	if err := json.Unmarshal(upstream.Run(t, 2*time.Minute, loadsProgram, stdin), &want); err != nil || len(want) != len(cases) {
		t.Fatalf("upstream's answers (%v): %d for %d cases", err, len(want), len(cases))
	}
	agree, refused, other := 0, 0, 0
	for i, s := range cases {
		if strings.HasPrefix(want[i], "other: ") {
			other++
			continue
		}
		got := ""
		if why := agent.PythonJSONError(s); why != "" {
			got = agent.InvalidArguments(why)
			refused++
		}
		if got != want[i] {
			t.Errorf("arguments %q:\n got %s\nwant %s", s, got, want[i])
			continue
		}
		agree++
	}
	t.Logf("%d argument strings (%d refused, %d not JSONDecodeError upstream), %d agree", len(cases), refused, other, agree)
}

// FuzzPythonJSONError: the scan never panics, and refuses nothing
// encoding/json accepts (the agent relies on that to skip it for valid
// arguments); a refusal is one JSONDecodeError repr.
func FuzzPythonJSONError(f *testing.F) {
	for _, s := range argumentFragments {
		f.Add(s)
	}
	f.Add(`{"a": [1, 2.5e-3, "\ud83d\ude00", null, true, false, NaN]}`)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			t.Skip("arguments are decoded JSON strings, valid UTF-8")
		}
		why := agent.PythonJSONError(s)
		if json.Valid([]byte(s)) && why != "" {
			t.Fatalf("%q: encoding/json accepts it, the Python scan refuses it: %s", s, why)
		}
		if why != "" && (!strings.HasPrefix(why, "JSONDecodeError(") || !strings.HasSuffix(why, ")")) {
			t.Fatalf("%q: %s is not a JSONDecodeError repr", s, why)
		}
	})
}
