package equivalence

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

// Alphabets of the pseudo-random strings in the tables.
const (
	alphaEnglish     = "etaoin shrdlu"
	alphaGreek       = "αβγδ Σσ😀東"
	alphaWide        = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	alphaWideUnicode = "abcdefghijklmnopqrstuvwxyzαβγδεζηθικλμνξοπρστυφχψω東京都大阪😀😃😄 "
)

// cat concatenates its arguments.
func cat(parts ...string) string { return strings.Join(parts, "") }

// rep repeats s n times.
func rep(s string, n int) string { return strings.Repeat(s, n) }

// rnd returns n code points drawn from alphabet by a 64-bit linear
// congruential generator seeded with seed, taking the high bits of each
// state. The expected values in the tables were computed in Python on
// strings made by the same generator.
func rnd(seed uint64, n int, alphabet string) string {
	alpha := []rune(alphabet)
	out := make([]rune, n)
	x := seed
	for i := range out {
		x = x*6364136223846793005 + 1442695040888963407
		out[i] = alpha[(x>>33)%uint64(len(alpha))]
	}
	return string(out)
}

// ratioCases: want is difflib.SequenceMatcher(None, a, b).ratio() as
// printed (repr) by CPython 3.11.7; CPython 3.13.0 prints the same values.
// Rows marked "autojunk" are ones where the heuristic changes the result.
var ratioCases = []struct {
	name string
	a, b string
	want float64
}{
	{"both empty", "", "", 1.0},
	{"b empty", "abc", "", 0.0},
	{"a empty", "", "abc", 0.0},
	{"same char", "a", "a", 1.0},
	{"different char", "a", "b", 0.0},
	{"shifted", "abcd", "bcde", 0.75},
	{"reversed", "abcd", "dcba", 0.25},
	{"insertion", "hello world", "hello there world", 0.7857142857142857},
	{"code line", "private Thread currentThread;", "private volatile Thread currentThread;", 0.8656716417910447},
	{"two blocks", "qabxcd", "abycdf", 0.6666666666666666},
	{"asymmetric ab", "tide", "diet", 0.25},
	{"asymmetric ba", "diet", "tide", 0.5},
	{"answer in sentence", "The answer is 42.", "42", 0.21052631578947367},
	{"sentence in answer", "42", "The answer is 42.", 0.21052631578947367},
	{"case differs", "Hello", "hello", 0.8},
	{"latin accents", "naïve café", "naive cafe", 0.8},
	{"cjk", "東京都庁", "京都", 0.6666666666666666},
	{"astral emoji", "😀😃😄🙂", "😀😄", 0.6666666666666666},
	{"combining vs precomposed", "e\u0301", "é", 0.0},
	{"eszett", "Straße", "strasse", 0.6153846153846154},
	{"nbsp vs space", "a\u00a0b", "a b", 0.6666666666666666},
	{"repeat long vs short", "aaaa", "aa", 0.6666666666666666},
	{"repeat pairs", "abababab", "baba", 0.6666666666666666},
	{"repeat vs one", rep("a", 10), "a", 0.18181818181818182},
	{"tie first block", "abxab", "ab", 0.5714285714285714},
	{"tie crossing", "ab_ba", "ba_ab", 0.4},
	{"b 199 no autojunk", rep("ab", 100), cat(rep("a", 100), rep("b", 99)), 0.5012531328320802},
	{"b 200 autojunk", rep("ab", 100), cat(rep("a", 100), rep("b", 100)), 0.005}, // autojunk on; off it would be 0.505
	{"long identical all popular", rep("ab", 150), rep("ab", 150), 1.0},
	{"long identical 199", cat(rep("ab", 99), "a"), cat(rep("ab", 99), "a"), 1.0},
	{"popular absorbed by extension", cat("q", rep("e", 250), "z"), cat("q", rep("e", 250), "z"), 1.0},
	{"long a short b", cat(rep("xy", 300), "answer"), "answer", 0.0196078431372549},
	{"short a long b", "answer", cat(rep("xy", 300), "answer"), 0.0196078431372549},
	{"random english 300", rnd(1, 300, alphaEnglish), rnd(2, 300, alphaEnglish), 0.0}, // autojunk on; off it would be 0.2633333333333333
	{"random english 1000 shared middle", cat(rnd(3, 400, alphaEnglish), rnd(4, 200, alphaEnglish), rnd(5, 400, alphaEnglish)), cat(rnd(6, 300, alphaEnglish), rnd(4, 200, alphaEnglish), rnd(7, 300, alphaEnglish)), 0.0}, // autojunk on; off it would be 0.31555555555555553
	{"random unicode 400", rnd(8, 400, alphaGreek), rnd(9, 400, alphaGreek), 0.0},                                                                                                                                  // autojunk on; off it would be 0.14
	{"random unicode shared", cat(rnd(10, 150, alphaGreek), rnd(11, 100, alphaGreek)), cat(rnd(11, 100, alphaGreek), rnd(12, 150, alphaGreek)), 0.0},                                                               // autojunk on; off it would be 0.4
	{"random wide 300", rnd(15, 300, alphaWide), rnd(16, 300, alphaWide), 0.05333333333333334},                                                                                                                     // autojunk on; off it would be 0.056666666666666664
	{"random wide 600 shared", cat(rnd(17, 200, alphaWide), rnd(18, 200, alphaWide), rnd(19, 200, alphaWide)), cat(rnd(20, 100, alphaWide), rnd(18, 200, alphaWide), rnd(21, 300, alphaWide)), 0.3566666666666667}, // autojunk on; off it would be 0.385
	{"random wide unicode 500", cat(rnd(22, 250, alphaWideUnicode), rnd(23, 250, alphaWideUnicode)), cat(rnd(23, 250, alphaWideUnicode), rnd(22, 250, alphaWideUnicode)), 0.5},
	{"random binary 250 vs 60", rnd(13, 250, "ab"), rnd(14, 60, "ab"), 0.34838709677419355},
	{"random binary 60 vs 250", rnd(14, 60, "ab"), rnd(13, 250, "ab"), 0.0}, // autojunk on; off it would be 0.34838709677419355
}

func TestRatioMatchesPython(t *testing.T) {
	for _, c := range ratioCases {
		t.Run(c.name, func(t *testing.T) {
			got := Ratio(c.a, c.b)
			if math.Float64bits(got) != math.Float64bits(c.want) {
				t.Errorf("Ratio(%q, %q) = %v, want %v (Python)", c.a, c.b, got, c.want)
			}
			if got := RatioRunes([]rune(c.a), []rune(c.b)); math.Float64bits(got) != math.Float64bits(c.want) {
				t.Errorf("RatioRunes = %v, want %v", got, c.want)
			}
		})
	}
}

func TestRatioAutojunkThreshold(t *testing.T) {
	// 'a' occurs 100 times in b. With 199 code points in b the heuristic
	// is off and 'a' seeds matches; with 200 the limit is 200/100+1 = 3,
	// so 'a' and 'b' are both popular and nothing seeds a match.
	a := rep("ab", 100)
	off := Ratio(a, cat(rep("a", 100), rep("b", 99)))
	on := Ratio(a, cat(rep("a", 100), rep("b", 100)))
	if off <= 0.5 || on >= 0.01 {
		t.Errorf("ratio with b of 199 = %v (want > 0.5), of 200 = %v (want < 0.01)", off, on)
	}
	// Only the second string is inspected: with a 100-code-point string
	// second, the heuristic is off. Values from CPython.
	short, long := rep("ab", 50), cat(rep("a", 100), rep("b", 100))
	if r := Ratio(short, long); r != 0.006666666666666667 {
		t.Errorf("Ratio(short, long) = %v, want 0.006666666666666667", r)
	}
	if r := Ratio(long, short); r != 0.34 {
		t.Errorf("Ratio(long, short) = %v, want 0.34", r)
	}
}

func TestRatioDoesNotModifyInput(t *testing.T) {
	a, b := []rune(rnd(1, 300, alphaWide)), []rune(rnd(2, 300, alphaWide))
	a0, b0 := string(a), string(b)
	RatioRunes(a, b)
	if string(a) != a0 || string(b) != b0 {
		t.Fatal("RatioRunes modified its input")
	}
}

func TestRatioInvalidUTF8(t *testing.T) {
	// Each invalid byte is one U+FFFD, as a []rune conversion gives.
	if got, want := Ratio("a\xff\xfe", "a\uFFFD\uFFFD"), 1.0; got != want {
		t.Errorf("Ratio = %v, want %v", got, want)
	}
}

func FuzzRatio(f *testing.F) {
	f.Add("abcd", "bcde")
	f.Add("", "x")
	f.Add(rep("ab", 150), rep("ba", 150))
	f.Add("ΟΔΟΣ😀", "οδος😀")
	f.Fuzz(func(t *testing.T, a, b string) {
		r := Ratio(a, b)
		if !(r >= 0 && r <= 1) {
			t.Fatalf("Ratio(%q, %q) = %v, outside [0, 1]", a, b, r)
		}
		// Without autojunk a string matches itself in one block.
		if utf8.RuneCountInString(b) < autojunkMinLen && Ratio(b, b) != 1 {
			t.Fatalf("Ratio(%q, itself) = %v, want 1", b, Ratio(b, b))
		}
	})
}

// benchText returns about n bytes of word-like text: words of the
// English alphabet separated by spaces.
func benchText(seed uint64, n int) string {
	var sb strings.Builder
	for i := uint64(0); sb.Len() < n; i++ {
		sb.WriteString(rnd(seed+i, 2+int(i%7), "abcdefghijklmnopqrstuvwxyz"))
		sb.WriteByte(' ')
	}
	return sb.String()[:n]
}

func BenchmarkRatio(b *testing.B) {
	// Two 2 KB texts that share their middle third.
	x := benchText(1, 2048)
	y := cat(benchText(7, 683), x[683:1366], benchText(9, 682))
	b.SetBytes(int64(len(x) + len(y)))
	b.ReportAllocs()
	for b.Loop() {
		Ratio(x, y)
	}
}
