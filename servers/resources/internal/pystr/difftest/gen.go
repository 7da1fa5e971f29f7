package difftest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Gen draws the pieces of generated cases from a seeded source, so a
// failing case can be regenerated from its seed.
type Gen struct {
	R *rand.Rand
	n int // item counter, for ids
}

// NewGen returns a generator seeded with seed.
func NewGen(seed uint64) *Gen {
	return &Gen{R: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Pick returns one of xs at random.
func Pick[T any](g *Gen, xs ...T) T { return xs[g.R.IntN(len(xs))] }

// Chance is true with probability p.
func (g *Gen) Chance(p float64) bool { return g.R.Float64() < p }

// Space returns a short run of whitespace, Python's exotic kinds
// (U+001C..U+001F, U+0085, U+3000, line and paragraph separators, ...)
// among the common ones, or "".
func (g *Gen) Space() string {
	if g.Chance(0.3) {
		return ""
	}
	if g.Chance(0.6) {
		return " "
	}
	var b strings.Builder
	for range 1 + g.R.IntN(3) {
		b.WriteString(Pick(g, " ", "  ", "\n", "\t", "\r\n", "\u00a0", "\u3000", "\u2003", "\x1c", "\x1f",
			"\u2028", "\u0085", "\v", "\f", "\u200b", "\u202f"))
	}
	return b.String()
}

// Word returns a word: plain ASCII, or one of the Unicode forms whose
// case mapping, NFKC form or category differs from the obvious.
func (g *Gen) Word() string {
	if g.Chance(0.6) {
		return Pick(g, "the", "and", "or", "answer", "Answer", "is", "so", "we", "get", "option", "Final", "choice",
			"therefore", "Paris", "paris", "London", "blue", "A", "B", "C", "D", "E", "a", "b", "x", "I", "yes", "No",
			"New York", "texas", "Oregon", "ORANGE", "cat", "Cat", "dog", "e.g.", "i.e.", "etc.", "(B)", "[C]", "A)",
			"B:", "C.", "D-", "**A**", "*B*", "_C_", "`D`", "Σ", "σ")
	}
	return Pick(g, "ＡＢＣ", "Ａ", "Ｂ", "ｃ", "ｄ", "１２３", "１，０００", "ﬁne", "ﬀ", "²", "³", "½", "①", "Ⅷ", "ｱｲｳ",
		"㎞", "℃", "ℌ", "ß", "Straße", "İstanbul", "ΟΔΟΣ", "ΣΑΣ", "Σ.", "ǅ", "ŉ", "ﬃ", "Ω", "Ω", "é", "é", "ñ",
		"日本", "答案", "答案：", "é", "😀", "\u0301", "ا", "أ", "ب", "ج", "د", "অ", "ব", "ড", "ঢ", "٣", "۳", "߃",
		"Ａｎｓｗｅｒ", "ＡＮＳＷＥＲ", "ANSWER", "anſwer", "K", "ǈ", "µ", "π", "°", "√2", "﹣3", "：", "﹦", "ı", "ẞ",
		"ﬅ", "ǰ", "ΐ")
}

// Words returns n words joined by Space() or single spaces.
func (g *Gen) Words(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			if s := g.Space(); s != "" {
				b.WriteString(s)
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(g.Word())
	}
	return b.String()
}

// Number returns a number in one of many notations, and a second form
// that some graders take for the same value (or a near one).
func (g *Gen) Number() (string, string) {
	v := g.R.IntN(2000) - 500
	switch g.R.IntN(22) {
	case 0:
		return fmt.Sprint(v), fmt.Sprintf("%d.0", v)
	case 1:
		return "1,000", "1000"
	case 2:
		return "1e3", "1000"
	case 3:
		return "0.5", ".5"
	case 4:
		return "-3", "﹣3"
	case 5:
		return `\frac{1}{2}`, "1/2"
	case 6:
		return "50%", `50\%`
	case 7:
		return `$\frac{3}{4}$`, `\(\frac{3}{4}\)`
	case 8:
		return "1,234,567", "1234567"
	case 9:
		return fmt.Sprintf("%d", v*1000+7), fmt.Sprintf("%d,%03d", v, 7)
	case 10:
		return "3.14159", "3.14"
	case 11:
		return "100", "99.5"
	case 12:
		return "5 cm", "5"
	case 13:
		return `90^\circ`, "90°"
	case 14:
		return "2²", "2^2"
	case 15:
		return "$12", `\$12`
	case 16:
		return "1_000", "1000"
	case 17:
		return "inf", "Infinity"
	case 18:
		return "nan", "NaN"
	case 19:
		return "１２", "12"
	case 20:
		return "0.1", "1e-1"
	default:
		return fmt.Sprintf("%.3f", float64(v)/7), fmt.Sprintf("%.2f", float64(v)/7)
	}
}

// Boxed wraps s in \boxed{...}, sometimes inside \text{...} wrappers,
// sometimes with spaces inside.
func (g *Gen) Boxed(s string) string {
	switch g.R.IntN(6) {
	case 0:
		s = `\text{` + s + `}`
	case 1:
		s = `\text{ ` + s + ` }`
	case 2:
		s = `\text{\text{` + s + `}}`
	case 3:
		s = " " + s + " "
	}
	return `\boxed{` + s + `}`
}

// Rendered returns the JSON string of v, for building bodies by hand.
func Rendered(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (g *Gen) id(prefix string) string {
	g.n++
	return fmt.Sprintf("%s_%d", prefix, g.n)
}

// OutputText returns an output_text part.
func (g *Gen) OutputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
}

// Message returns an assistant output message with the given parts;
// now and then without its role, with another status or with a phase.
func (g *Gen) Message(parts ...map[string]any) map[string]any {
	content := make([]any, len(parts))
	for i, p := range parts {
		content[i] = p
	}
	m := map[string]any{"id": g.id("msg"), "type": "message", "role": "assistant", "status": "completed", "content": content}
	if g.Chance(0.05) {
		delete(m, "role") // upstream's output message defaults it to assistant
	}
	if g.Chance(0.05) {
		m["status"] = Pick(g, "incomplete", "in_progress")
	}
	if g.Chance(0.03) {
		m["phase"] = Pick(g, "commentary", "final_answer")
	}
	return m
}

// TextMessage returns an assistant output message with one output_text
// part per text.
func (g *Gen) TextMessage(texts ...string) map[string]any {
	parts := make([]map[string]any, len(texts))
	for i, t := range texts {
		parts[i] = g.OutputText(t)
	}
	return g.Message(parts...)
}

// Refusal returns a refusal part.
func (g *Gen) Refusal(text string) map[string]any {
	return map[string]any{"type": "refusal", "refusal": text}
}

// Reasoning returns a reasoning item whose summary says text.
func (g *Gen) Reasoning(text string) map[string]any {
	return map[string]any{"id": g.id("rs"), "type": "reasoning",
		"summary": []any{map[string]any{"type": "summary_text", "text": text}}}
}

// FunctionCall returns a function_call item whose arguments mention text.
func (g *Gen) FunctionCall(text string) map[string]any {
	return map[string]any{"type": "function_call", "id": g.id("fc"), "call_id": g.id("call"), "name": "lookup",
		"arguments": Rendered(map[string]string{"q": text}), "status": "completed"}
}

// FunctionCallOutput returns a function_call_output item (the request
// form, which local agents put in trajectories) whose output is text.
func (g *Gen) FunctionCallOutput(text string) map[string]any {
	return map[string]any{"type": "function_call_output", "call_id": g.id("call"), "output": text}
}

// PlainMessage returns a message whose content is a plain string, in
// role (upstream's easy input message form).
func (g *Gen) PlainMessage(role, text string) map[string]any {
	return map[string]any{"type": "message", "role": role, "content": text}
}

// InputMessage returns a message of role whose content is one input_text
// part.
func (g *Gen) InputMessage(role, text string) map[string]any {
	return map[string]any{"type": "message", "role": role,
		"content": []any{map[string]any{"type": "input_text", "text": text}}}
}

// Response returns a completed Responses API response with these output
// items.
func (g *Gen) Response(items ...map[string]any) map[string]any {
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = it
	}
	return map[string]any{"id": g.id("resp"), "object": "response", "created_at": 1767225600, "model": "difftest",
		"output": out, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}, "status": "completed"}
}

// Body returns a verify body: a one-message prompt, the task fields and
// the response.
func (g *Gen) Body(fields map[string]any, response map[string]any) json.RawMessage {
	body := map[string]any{
		"responses_create_params": map[string]any{"input": []any{map[string]any{"role": "user", "content": "Question?"}}},
		"response":                response,
	}
	for k, v := range fields {
		body[k] = v
	}
	return json.RawMessage(Rendered(body))
}

// exoticRanges are code point ranges whose case mappings, compatibility
// decompositions or whitespace status are easy to get wrong.
var exoticRanges = [][2]rune{
	{0x00, 0x24f}, {0x250, 0x2ff}, {0x300, 0x36f}, {0x370, 0x3ff}, {0x400, 0x52f}, {0x531, 0x58f},
	{0x10a0, 0x10ff}, {0x13a0, 0x13fd}, {0x1c80, 0x1cbf}, {0x1d00, 0x1dbf}, {0x1e00, 0x1fff},
	{0x2000, 0x206f}, {0x2070, 0x209f}, {0x2100, 0x218f}, {0x2460, 0x24ff}, {0x2c00, 0x2c7f},
	{0x2c80, 0x2cff}, {0x2d00, 0x2d2f}, {0x3000, 0x303f}, {0x3200, 0x33ff}, {0xa640, 0xa69f},
	{0xa720, 0xa7ff}, {0xab70, 0xabbf}, {0xf900, 0xfaff}, {0xfb00, 0xfb4f}, {0xfe10, 0xfe6f},
	{0xff00, 0xffef}, {0x10400, 0x1044f}, {0x104b0, 0x104ff}, {0x10c80, 0x10cff}, {0x118a0, 0x118ff},
	{0x16e40, 0x16e9f}, {0x1d400, 0x1d7ff}, {0x1e900, 0x1e95f}, {0x1f100, 0x1f1ff}, {0x2f800, 0x2fa1f},
}

// Exotic returns one to four code points drawn from exoticRanges.
func (g *Gen) Exotic() string {
	var b strings.Builder
	for range 1 + g.R.IntN(4) {
		r := Pick(g, exoticRanges...)
		c := r[0] + rune(g.R.IntN(int(r[1]-r[0]+1)))
		if c == 0 || (c >= 0xd800 && c <= 0xdfff) {
			c = 'x'
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Member is one member of an Object.
type Member struct {
	Key   string
	Value any
}

// Object is a JSON object whose members keep their order (and may
// repeat a key), where a Go map would be written in sorted key order.
type Object []Member

// MarshalJSON writes the members in order.
func (o Object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(m.Key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.Value)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}
