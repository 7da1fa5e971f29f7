// Package pyre runs Python regular expressions (Python 3.13's re module)
// on github.com/dlclark/regexp2, for the ported verifiers that read an
// answer with the patterns upstream's Python uses.
//
// regexp2 is a backtracking engine with the same matching model as
// Python's sre (ordered alternation, greedy/lazy/possessive quantifiers,
// lookaround, backreferences, conditionals, atomic groups), but its
// syntax and some of its semantics are .NET's. A Python pattern is
// therefore not handed to regexp2 as it is: Compile parses it with
// Python 3.13's grammar and rules, rejects what Python rejects (with the
// error kind Python raises), and writes an equivalent .NET pattern in
// which every construct whose meaning differs between the two dialects is
// spelled out explicitly:
//
//   - \d, \w, \s and their negations use Python's character sets (\s
//     includes U+001C..U+001F; \w is letters, numbers and "_"), and the
//     ASCII ones under the (?a) flag;
//   - \b and \B are built from lookarounds on Python's \w;
//   - ^, $, \Z and . are written out so that .NET's multiline and
//     singleline options play no part;
//   - named groups become plain numbered ones, so group numbers stay
//     Python's (in .NET named groups are numbered after all unnamed ones),
//     and (?P=name) becomes a numbered backreference;
//   - under IGNORECASE, characters listed in Python's re._casefix table
//     (ſ and s, ς and σ, ϐ and β, ...) match one another;
//   - lookbehinds must have a fixed width, as in Python (.NET accepts any).
//
// Regexp.FindAll then iterates matches the way Python's re.findall does,
// including its treatment of empty matches.
package pyre

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/runenames"
)

// Python's limits (_sre.MAXREPEAT, _sre.MAXGROUPS, the compiler's
// MAXCODE).
const (
	pyMaxRepeat = 1<<32 - 1
	pyMaxGroups = 1<<30 - 1
	pyMaxCode   = 1<<32 - 1
	// pyMaxWidth stands for "unbounded" in width arithmetic.
	pyMaxWidth = 1 << 62
	// maxDotnetCount is the largest repetition count regexp2 accepts.
	maxDotnetCount = 1<<31 - 1
)

// Flag is a bit of Python's re flags.
type Flag uint16

// The flags, as Python's re.IGNORECASE, re.MULTILINE, re.DOTALL,
// re.VERBOSE, re.ASCII and re.UNICODE.
const (
	// IgnoreCase is re.I: letters match in either case.
	IgnoreCase Flag = 1 << iota
	// Multiline is re.M: ^ and $ also match at line boundaries.
	Multiline
	// DotAll is re.S: . also matches a newline.
	DotAll
	// Verbose is re.X: whitespace and # comments in the pattern are
	// ignored.
	Verbose
	// ASCII is re.A: \w, \d, \s and \b know ASCII characters only.
	ASCII
	// Unicode is re.U, the default of str patterns.
	Unicode
	typeFlags = ASCII | Unicode
)

var flagLetters = map[rune]Flag{
	'i': IgnoreCase, 'm': Multiline, 's': DotAll, 'x': Verbose,
	'a': ASCII, 'u': Unicode,
	'L': 0, // LOCALE: known to the parser, refused for str patterns
}

// PatternError is a pattern Python's re refuses to compile, i.e. where
// re.compile raises re.error (re.PatternError).
type PatternError struct {
	msg string
	pos int
}

func (e *PatternError) Error() string {
	return fmt.Sprintf("python re.error: %s at position %d", e.msg, e.pos)
}

// RaisedError is a pattern on which Python's re.compile raises some
// exception other than re.error (OverflowError, ValueError), which
// upstream does not catch.
type RaisedError struct {
	exc string
	msg string
}

func (e *RaisedError) Error() string { return "python " + e.exc + ": " + e.msg }

// ErrUnsupported is wrapped by the error for a Python pattern that
// Python accepts but this port cannot run: repetition counts or
// lookbehind widths beyond regexp2's 32-bit limits.
var ErrUnsupported = errors.New("Python regular expression not supported by this port")

// Regexp is a compiled Python pattern.
type Regexp struct {
	re *regexp2.Regexp
	// advance matches like re, but never an empty string at the position
	// the search starts from; FindAll needs it after an empty match.
	advance *regexp2.Regexp
	// groups is the number of capturing groups (Python's re.groups).
	groups int
	// dotnet is the translated pattern, for tests and debugging.
	dotnet string
}

// Compile compiles pattern as Python's re.compile(pattern, flags) does.
// The error is a *PatternError where Python raises re.error, a
// *RaisedError where it raises another exception, and wraps
// ErrUnsupported where this port cannot follow.
func Compile(pattern string, flags Flag) (*Regexp, error) {
	out, groups, final, err := pyTranslate(pattern, flags)
	if err != nil {
		return nil, err
	}
	var opts regexp2.RegexOptions
	if final&IgnoreCase != 0 {
		opts |= regexp2.IgnoreCase
	}
	re, err := regexp2.Compile(out, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrUnsupported, pattern, err)
	}
	adv, err := regexp2.Compile(`(?:`+out+`)(?<!\G)`, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrUnsupported, pattern, err)
	}
	return &Regexp{re: re, advance: adv, groups: groups, dotnet: out}, nil
}

// MustCompile is Compile for a pattern fixed in the program; it panics
// when the pattern does not compile.
func MustCompile(pattern string, flags Flag) *Regexp {
	re, err := Compile(pattern, flags)
	if err != nil {
		panic(err)
	}
	return re
}

// pyCache keeps compiled user patterns, as Python's re module does; the
// verifier sees the same few output_regex values over and over.
var pyCache struct {
	sync.Mutex
	m map[pyCacheKey]pyCacheEntry
}

type pyCacheKey struct {
	pattern string
	flags   Flag
}

type pyCacheEntry struct {
	re  *Regexp
	err error
}

const pyCacheSize = 512

// CompileCached is Compile with a bounded cache of results (errors
// included).
func CompileCached(pattern string, flags Flag) (*Regexp, error) {
	k := pyCacheKey{pattern, flags}
	pyCache.Lock()
	e, ok := pyCache.m[k]
	pyCache.Unlock()
	if ok {
		return e.re, e.err
	}
	re, err := Compile(pattern, flags)
	pyCache.Lock()
	if pyCache.m == nil || len(pyCache.m) >= pyCacheSize {
		pyCache.m = make(map[pyCacheKey]pyCacheEntry)
	}
	pyCache.m[k] = pyCacheEntry{re, err}
	pyCache.Unlock()
	return re, err
}

// FindAll calls fn for each match of re in text, in order, as Python's
// re.finditer and re.findall enumerate them: the next search starts where
// the previous match ended, and after an empty match the next match may
// start at the same place but must not be empty there. fn returns false
// to stop.
func (re *Regexp) FindAll(text []rune, fn func(m *regexp2.Match) bool) error {
	pos, mustAdvance := 0, false
	for pos <= len(text) {
		engine := re.re
		if mustAdvance {
			engine = re.advance
		}
		m, err := engine.FindRunesMatchStartingAt(text, pos)
		if err != nil {
			return err
		}
		if m == nil {
			return nil
		}
		if !fn(m) {
			return nil
		}
		end := m.Index + m.Length
		mustAdvance = m.Length == 0
		pos = end
	}
	return nil
}

// Search is Python's re.search: the first match, or nil.
func (re *Regexp) Search(text []rune) (*regexp2.Match, error) {
	return re.re.FindRunesMatch(text)
}

// Groups is the number of capturing groups of the pattern (Python's
// Pattern.groups).
func (re *Regexp) Groups() int { return re.groups }

// Escape is Python's re.escape: every character of re's special set
// (and whitespace) gets a backslash.
func Escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("()[]{}?*+-|^$\\.&~# \t\n\r\v\f", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// spaceRanges lists pystr.IsSpace (Python's str.isspace, which \s
// follows) as inclusive ranges, for character classes.
var spaceRanges = [][2]rune{
	{'\t', '\r'}, {0x1c, ' '}, {0x85, 0x85}, {0xa0, 0xa0}, {0x1680, 0x1680},
	{0x2000, 0x200a}, {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f},
	{0x3000, 0x3000},
}

// caseFix lists, for a lowercase character, the other characters that
// Python's re treats as equal to it under IGNORECASE although their
// simple lowercase differs (long s and s, final and medial sigma, the
// Greek symbol variants, ...). Python keeps this table in re._casefix.
var caseFix = map[rune][]rune{
	0x0069: {0x0131}, 0x0073: {0x017f}, 0x00b5: {0x03bc}, 0x0131: {0x0069}, 0x017f: {0x0073},
	0x0345: {0x03b9, 0x1fbe}, 0x0390: {0x1fd3}, 0x03b0: {0x1fe3}, 0x03b2: {0x03d0},
	0x03b5: {0x03f5}, 0x03b8: {0x03d1}, 0x03b9: {0x0345, 0x1fbe}, 0x03ba: {0x03f0},
	0x03bc: {0x00b5}, 0x03c0: {0x03d6}, 0x03c1: {0x03f1}, 0x03c2: {0x03c3}, 0x03c3: {0x03c2},
	0x03c6: {0x03d5}, 0x03d0: {0x03b2}, 0x03d1: {0x03b8}, 0x03d5: {0x03c6}, 0x03d6: {0x03c0},
	0x03f0: {0x03ba}, 0x03f1: {0x03c1}, 0x03f5: {0x03b5}, 0x0432: {0x1c80}, 0x0434: {0x1c81},
	0x043e: {0x1c82}, 0x0441: {0x1c83}, 0x0442: {0x1c84, 0x1c85}, 0x044a: {0x1c86},
	0x0463: {0x1c87}, 0x1c80: {0x0432}, 0x1c81: {0x0434}, 0x1c82: {0x043e}, 0x1c83: {0x0441},
	0x1c84: {0x0442, 0x1c85}, 0x1c85: {0x0442, 0x1c84}, 0x1c86: {0x044a}, 0x1c87: {0x0463},
	0x1c88: {0xa64b}, 0x1e61: {0x1e9b}, 0x1e9b: {0x1e61}, 0x1fbe: {0x0345, 0x03b9},
	0x1fd3: {0x0390}, 0x1fe3: {0x03b0}, 0xa64b: {0x1c88}, 0xfb05: {0xfb06}, 0xfb06: {0xfb05},
}

// pyTranslate parses a Python pattern and writes its .NET equivalent. It
// returns the pattern, the number of capturing groups and the pattern's
// global flags.
func pyTranslate(pattern string, flags Flag) (out string, groups int, final Flag, err error) {
	p := &pyParser{
		src:              []rune(pattern),
		flags:            flags,
		groupWidths:      []*[2]uint64{nil},
		groupNames:       map[string]int{},
		lookbehindGroups: -1,
		grouprefpos:      map[int]int{},
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				panic(r)
			}
			var pe *PatternError
			var re *RaisedError
			if !errors.As(e, &pe) && !errors.As(e, &re) && !errors.Is(e, ErrUnsupported) {
				panic(r)
			}
			out, groups, final, err = "", 0, 0, e
		}
	}()
	p.seek(0)
	body, _, _ := p.parseSub(pyCtx{}, flags&Verbose != 0, 0)
	if p.next != "" {
		p.fail("unbalanced parenthesis", 0)
	}
	for g, pos := range p.grouprefpos {
		if g >= len(p.groupWidths) {
			panic(&PatternError{fmt.Sprintf("invalid group reference %d", g), pos})
		}
	}
	if p.flags&ASCII != 0 && p.flags&Unicode != 0 {
		panic(&RaisedError{"ValueError", "ASCII and UNICODE flags are incompatible"})
	}
	return body, len(p.groupWidths) - 1, p.flags, nil
}

// pyCtx is what a part of the pattern inherits from the groups around it:
// scoped is false outside any (?flags:...) group, where the pattern's
// global flags apply; inside one, flags holds the effective flags.
type pyCtx struct {
	scoped bool
	flags  Flag
}

// pyParser follows the structure of CPython's re._parser: a tokenizer
// whose tokens are one character or a backslash and the character after
// it, a one-token lookahead (next), and the parser state.
type pyParser struct {
	src   []rune
	index int    // where the token after next starts
	next  string // the lookahead token; "" at the end of the pattern
	flags Flag   // global flags, from the caller and (?flags) at the start

	groupWidths      []*[2]uint64 // per group number; nil while open
	groupNames       map[string]int
	lookbehindGroups int // first group number inside the current lookbehind; -1 outside
	grouprefpos      map[int]int
}

func (p *pyParser) fail(msg string, offset int) {
	panic(&PatternError{msg, p.tell() - offset})
}

func (p *pyParser) advance() {
	i := p.index
	if i >= len(p.src) {
		p.next = ""
		return
	}
	tok := string(p.src[i])
	if p.src[i] == '\\' {
		i++
		if i >= len(p.src) {
			panic(&PatternError{"bad escape (end of pattern)", len(p.src) - 1})
		}
		tok += string(p.src[i])
	}
	p.index = i + 1
	p.next = tok
}

func (p *pyParser) tell() int { return p.index - len([]rune(p.next)) }

func (p *pyParser) seek(i int) {
	p.index = i
	p.advance()
}

func (p *pyParser) match(tok string) bool {
	if p.next != "" && p.next == tok {
		p.advance()
		return true
	}
	return false
}

func (p *pyParser) get() string {
	t := p.next
	p.advance()
	return t
}

// getWhile takes up to n tokens that are single characters of set.
func (p *pyParser) getWhile(n int, set string) string {
	var b strings.Builder
	for range n {
		c := p.next
		if len([]rune(c)) != 1 || !strings.Contains(set, c) {
			break
		}
		b.WriteString(c)
		p.advance()
	}
	return b.String()
}

func (p *pyParser) getUntil(term, name string) string {
	var b strings.Builder
	for {
		c := p.next
		p.advance()
		if c == "" {
			if b.Len() == 0 {
				p.fail("missing "+name, 0)
			}
			p.fail("missing "+term+", unterminated name", len([]rune(b.String())))
		}
		if c == term {
			if b.Len() == 0 {
				p.fail("missing "+name, 1)
			}
			return b.String()
		}
		b.WriteString(c)
	}
}

func (p *pyParser) checkGroupName(name string, offset int) {
	if !pyIsIdentifier(name) {
		p.fail("bad character in group name "+strconv.Quote(name), len([]rune(name))+offset)
	}
}

func (p *pyParser) checkGroup(gid int) bool {
	return gid < len(p.groupWidths) && p.groupWidths[gid] != nil
}

func (p *pyParser) checkLookbehindGroup(gid int) {
	if p.lookbehindGroups >= 0 {
		if !p.checkGroup(gid) {
			p.fail("cannot refer to an open group", 0)
		}
		if gid >= p.lookbehindGroups {
			p.fail("cannot refer to group defined in the same lookbehind subpattern", 0)
		}
	}
}

func (p *pyParser) eff(c pyCtx) Flag {
	if c.scoped {
		return c.flags
	}
	return p.flags
}

// pyOp is the kind of a parsed item, as far as the parser's checks need
// to know it.
type pyOp uint8

const (
	opUnit       pyOp = iota // one character: literal, set, category, any
	opAt                     // zero-width anchor: ^ $ \A \Z \b \B
	opRepeat                 // a quantified item
	opSubpattern             // a group
	opOther                  // lookaround, backreference, conditional, atomic group
)

// pyItem is one parsed item: its .NET text, whether that text can take a
// quantifier as it is, and its width range in characters.
type pyItem struct {
	op     pyOp
	out    string
	atom   bool
	lo, hi uint64
	// inner is set for a non-capturing group without flags: Python
	// repeats its content rather than the group.
	inner *pyItem
}

func satAdd(a, b uint64) uint64 {
	if a >= pyMaxWidth || b >= pyMaxWidth || a+b >= pyMaxWidth {
		return pyMaxWidth
	}
	return a + b
}

func satMul(a, b uint64) uint64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a >= pyMaxWidth || b >= pyMaxWidth || a > pyMaxWidth/b {
		return pyMaxWidth
	}
	return a * b
}

// seqItem joins a sequence into one item.
func seqItem(items []pyItem) pyItem {
	var b strings.Builder
	var lo, hi uint64
	for _, it := range items {
		b.WriteString(it.out)
		lo, hi = satAdd(lo, it.lo), satAdd(hi, it.hi)
	}
	it := pyItem{op: opOther, out: b.String(), lo: lo, hi: hi}
	if len(items) == 1 {
		it.atom = items[0].atom
	}
	return it
}

// parseSub parses alternatives up to ")" or the end.
func (p *pyParser) parseSub(ctx pyCtx, verbose bool, nested int) (string, uint64, uint64) {
	var alts []pyItem
	for {
		alts = append(alts, seqItem(p.parse(ctx, verbose, nested+1, nested == 0 && len(alts) == 0)))
		if !p.match("|") {
			break
		}
		if nested == 0 {
			verbose = p.flags&Verbose != 0
		}
	}
	if len(alts) == 1 {
		return alts[0].out, alts[0].lo, alts[0].hi
	}
	outs := make([]string, len(alts))
	lo, hi := uint64(pyMaxWidth), uint64(0)
	for i, a := range alts {
		outs[i] = a.out
		lo, hi = min(lo, a.lo), max(hi, a.hi)
	}
	return strings.Join(outs, "|"), lo, hi
}

const pySpecialChars = ".\\[{()*+?^$|"

// parse parses one alternative: a sequence of items up to "|", ")" or the
// end.
func (p *pyParser) parse(ctx pyCtx, verbose bool, nested int, first bool) []pyItem {
	var items []pyItem
	for {
		this := p.next
		if this == "" || this == "|" || this == ")" {
			return items
		}
		p.get()
		if verbose {
			if len(this) == 1 && strings.Contains(" \t\n\r\v\f", this) {
				continue
			}
			if this == "#" {
				for {
					t := p.get()
					if t == "" || t == "\n" {
						break
					}
				}
				continue
			}
		}
		r := []rune(this)
		switch {
		case r[0] == '\\':
			items = append(items, p.escape(ctx, this))
		case len(r) != 1 || !strings.ContainsRune(pySpecialChars, r[0]):
			items = append(items, p.literal(ctx, r[0]))
		case this == "[":
			items = append(items, p.class(ctx))
		case strings.Contains("*+?{", this):
			var ok bool
			items, ok = p.repeat(ctx, this, items)
			if !ok {
				items = append(items, p.literal(ctx, '{'))
			}
		case this == ".":
			out := `[^\n]`
			if p.eff(ctx)&DotAll != 0 {
				out = `[\s\S]`
			}
			items = append(items, pyItem{op: opUnit, out: out, atom: true, lo: 1, hi: 1})
		case this == "(":
			it, ok := p.group(ctx, verbose, nested, first && len(items) == 0)
			if !ok {
				// global flags
				verbose = p.flags&Verbose != 0
				continue
			}
			if it != nil {
				items = append(items, *it)
			}
		case this == "^":
			out := `\A`
			if p.eff(ctx)&Multiline != 0 {
				out = `(?m:^)`
			}
			items = append(items, pyItem{op: opAt, out: out})
		case this == "$":
			out := `(?=\n?\z)`
			if p.eff(ctx)&Multiline != 0 {
				out = `(?=\n|\z)`
			}
			items = append(items, pyItem{op: opAt, out: out})
		default:
			panic("pyre: unexpected pattern character " + this)
		}
	}
}

// repeat applies the quantifier that starts with this to the last item.
// ok is false when "{" turned out not to start a quantifier.
func (p *pyParser) repeat(ctx pyCtx, this string, items []pyItem) ([]pyItem, bool) {
	here := p.tell()
	var lo, hi uint64
	switch this {
	case "?":
		lo, hi = 0, 1
	case "*":
		lo, hi = 0, pyMaxRepeat
	case "+":
		lo, hi = 1, pyMaxRepeat
	case "{":
		if p.next == "}" {
			return items, false
		}
		lo, hi = 0, pyMaxRepeat
		var los, his string
		for isASCIIDigitTok(p.next) {
			los += p.get()
		}
		if p.match(",") {
			for isASCIIDigitTok(p.next) {
				his += p.get()
			}
		} else {
			his = los
		}
		if !p.match("}") {
			p.seek(here)
			return items, false
		}
		if los != "" {
			lo = parseRepeatCount(los)
		}
		if his != "" {
			hi = parseRepeatCount(his)
			if hi < lo {
				p.fail("min repeat greater than max repeat", p.tell()-here)
			}
		}
	}
	if len(items) == 0 || items[len(items)-1].op == opAt {
		p.fail("nothing to repeat", p.tell()-here+len(this))
	}
	last := items[len(items)-1]
	if last.op == opRepeat {
		p.fail("multiple repeat", p.tell()-here+len(this))
	}
	item := last
	if last.inner != nil {
		item = *last.inner
	}
	lazy := p.match("?")
	possessive := !lazy && p.match("+")

	if lo > maxDotnetCount {
		panic(fmt.Errorf("%w: repetition count %d", ErrUnsupported, lo))
	}
	var q string
	switch {
	case lo == 0 && hi == 1:
		q = "?"
	case lo == 0 && hi == pyMaxRepeat:
		q = "*"
	case lo == 1 && hi == pyMaxRepeat:
		q = "+"
	case hi == pyMaxRepeat || hi > maxDotnetCount:
		// A bound above 2**31 cannot be reached by a text regexp2 can
		// hold, so it is the same as no bound.
		q = fmt.Sprintf("{%d,}", lo)
	case lo == hi:
		q = fmt.Sprintf("{%d}", lo)
	default:
		q = fmt.Sprintf("{%d,%d}", lo, hi)
	}
	base := item.out
	if !item.atom {
		base = "(?:" + base + ")"
	}
	out := base + q
	switch {
	case lazy:
		out += "?"
	case possessive:
		out = "(?>" + out + ")"
	}
	w := pyItem{op: opRepeat, out: out, atom: possessive}
	w.lo = satMul(item.lo, lo)
	if hi == pyMaxRepeat && item.hi != 0 {
		w.hi = pyMaxWidth
	} else {
		w.hi = satMul(item.hi, hi)
	}
	items[len(items)-1] = w
	return items, true
}

func isASCIIDigitTok(t string) bool { return len(t) == 1 && t[0] >= '0' && t[0] <= '9' }

func parseRepeatCount(s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n >= pyMaxRepeat {
		panic(&RaisedError{"OverflowError", "the repetition number is too large"})
	}
	return n
}

// group parses what follows "(". It returns ok false for a global flags
// group, and a nil item for a comment.
func (p *pyParser) group(ctx pyCtx, verbose bool, nested int, firstEmpty bool) (*pyItem, bool) {
	start := p.tell() - 1
	capture, atomic := true, false
	name := ""
	hasName := false
	var add, del Flag
	if p.match("?") {
		char := p.get()
		switch {
		case char == "":
			p.fail("unexpected end of pattern", 0)
		case char == "P":
			switch {
			case p.match("<"):
				name = p.getUntil(">", "group name")
				p.checkGroupName(name, 1)
				hasName = true
			case p.match("="):
				name = p.getUntil(")", "group name")
				p.checkGroupName(name, 1)
				gid, ok := p.groupNames[name]
				if !ok {
					p.fail("unknown group name "+strconv.Quote(name), len([]rune(name))+1)
				}
				if !p.checkGroup(gid) {
					p.fail("cannot refer to an open group", len([]rune(name))+1)
				}
				p.checkLookbehindGroup(gid)
				return p.groupRef(gid), true
			default:
				c := p.get()
				if c == "" {
					p.fail("unexpected end of pattern", 0)
				}
				p.fail("unknown extension ?P"+c, len([]rune(c))+2)
			}
		case char == ":":
			capture = false
		case char == "#":
			for {
				if p.next == "" {
					p.fail("missing ), unterminated comment", p.tell()-start)
				}
				if p.get() == ")" {
					break
				}
			}
			return nil, true
		case char == "=" || char == "!" || char == "<":
			return p.lookaround(ctx, verbose, nested, char, start), true
		case char == "(":
			return p.conditional(ctx, verbose, nested, start), true
		case char == ">":
			capture, atomic = false, true
		case char == "-" || isFlagLetter(char):
			global, a, d := p.parseFlags(char)
			if global {
				if !firstEmpty {
					p.fail("global flags not at the start of the expression", p.tell()-start)
				}
				return nil, false
			}
			add, del = a, d
			capture = false
		default:
			p.fail("unknown extension ?"+char, len([]rune(char))+1)
		}
	}
	gid := -1
	if capture {
		gid = len(p.groupWidths)
		p.groupWidths = append(p.groupWidths, nil)
		if gid > pyMaxGroups {
			p.fail("too many groups", 0)
		}
		if hasName {
			if og, ok := p.groupNames[name]; ok {
				p.fail(fmt.Sprintf("redefinition of group name %s as group %d; was group %d",
					strconv.Quote(name), gid, og), len([]rune(name))+1)
			}
			p.groupNames[name] = gid
		}
	}
	subVerbose := (verbose || add&Verbose != 0) && del&Verbose == 0
	sub := ctx
	if add != 0 || del != 0 {
		outer := p.eff(ctx)
		f := outer
		if add&typeFlags != 0 {
			f &^= typeFlags
		}
		f = (f | add) &^ del
		sub = pyCtx{scoped: true, flags: f}
	}
	body, lo, hi := p.parseSub(sub, subVerbose, nested+1)
	if !p.match(")") {
		p.fail("missing ), unterminated subpattern", p.tell()-start)
	}
	if gid >= 0 {
		p.groupWidths[gid] = &[2]uint64{lo, hi}
	}
	it := &pyItem{op: opSubpattern, atom: true, lo: lo, hi: hi}
	switch {
	case atomic:
		it.op = opOther
		it.out = "(?>" + body + ")"
	case gid >= 0:
		it.out = "(" + body + ")"
	case add == 0 && del == 0:
		it.out = "(?:" + body + ")"
		it.inner = &pyItem{op: opOther, out: body, lo: lo, hi: hi, atom: false}
	default:
		prefix := "(?:"
		if outerI, innerI := p.eff(ctx)&IgnoreCase, sub.flags&IgnoreCase; outerI != innerI {
			if innerI != 0 {
				prefix = "(?i:"
			} else {
				prefix = "(?-i:"
			}
		}
		it.out = prefix + body + ")"
	}
	return it, true
}

func isFlagLetter(t string) bool {
	r := []rune(t)
	if len(r) != 1 {
		return false
	}
	_, ok := flagLetters[r[0]]
	return ok
}

// parseFlags parses the flags of "(?flags)" or "(?flags-flags:". global
// is true for the first form, whose flags it has added to p.flags.
func (p *pyParser) parseFlags(char string) (global bool, add, del Flag) {
	if char != "-" {
		for {
			r := []rune(char)[0]
			if r == 'L' {
				p.fail("bad inline flags: cannot use 'L' flag with a str pattern", 0)
			}
			flag := flagLetters[r]
			add |= flag
			if flag&typeFlags != 0 && add&typeFlags != flag {
				p.fail("bad inline flags: flags 'a', 'u' and 'L' are incompatible", 0)
			}
			char = p.get()
			if char == "" {
				p.fail("missing -, : or )", 0)
			}
			if char == ")" || char == "-" || char == ":" {
				break
			}
			if !isFlagLetter(char) {
				if r := []rune(char); len(r) == 1 && unicode.IsLetter(r[0]) {
					p.fail("unknown flag", len(r))
				}
				p.fail("missing -, : or )", len([]rune(char)))
			}
		}
	}
	if char == ")" {
		p.flags |= add
		return true, 0, 0
	}
	if char == "-" {
		char = p.get()
		if char == "" {
			p.fail("missing flag", 0)
		}
		if !isFlagLetter(char) {
			if r := []rune(char); len(r) == 1 && unicode.IsLetter(r[0]) {
				p.fail("unknown flag", len(r))
			}
			p.fail("missing flag", len([]rune(char)))
		}
		for {
			r := []rune(char)[0]
			flag := flagLetters[r]
			if flag&typeFlags != 0 || r == 'L' {
				p.fail("bad inline flags: cannot turn off flags 'a', 'u' and 'L'", 0)
			}
			del |= flag
			char = p.get()
			if char == "" {
				p.fail("missing :", 0)
			}
			if char == ":" {
				break
			}
			if !isFlagLetter(char) {
				if r := []rune(char); len(r) == 1 && unicode.IsLetter(r[0]) {
					p.fail("unknown flag", len(r))
				}
				p.fail("missing :", len([]rune(char)))
			}
		}
	}
	if add&del != 0 {
		p.fail("bad inline flags: flag turned on and off", 1)
	}
	return false, add, del
}

func (p *pyParser) lookaround(ctx pyCtx, verbose bool, nested int, char string, start int) *pyItem {
	behind := false
	saved := p.lookbehindGroups
	if char == "<" {
		char = p.get()
		if char == "" {
			p.fail("unexpected end of pattern", 0)
		}
		if char != "=" && char != "!" {
			p.fail("unknown extension ?<"+char, len([]rune(char))+2)
		}
		behind = true
		if saved < 0 {
			p.lookbehindGroups = len(p.groupWidths)
		}
	}
	body, lo, hi := p.parseSub(ctx, verbose, nested+1)
	if behind && saved < 0 {
		p.lookbehindGroups = -1
	}
	if !p.match(")") {
		p.fail("missing ), unterminated subpattern", p.tell()-start)
	}
	if behind {
		// Python checks this when it compiles the parsed pattern.
		if lo > pyMaxCode {
			panic(&PatternError{"looks too much behind", 0})
		}
		if lo != hi {
			panic(&PatternError{"look-behind requires fixed-width pattern", 0})
		}
		if lo > maxDotnetCount {
			panic(fmt.Errorf("%w: lookbehind width %d", ErrUnsupported, lo))
		}
	}
	var out string
	switch {
	case behind && char == "=":
		out = "(?<=" + body + ")"
	case behind:
		out = "(?<!" + body + ")"
	case char == "=":
		out = "(?=" + body + ")"
	default:
		out = "(?!" + body + ")"
	}
	return &pyItem{op: opOther, out: out, atom: false}
}

func (p *pyParser) conditional(ctx pyCtx, verbose bool, nested int, start int) *pyItem {
	condname := p.getUntil(")", "group name")
	var cond int
	if !isASCIIDecimal(condname) {
		p.checkGroupName(condname, 1)
		g, ok := p.groupNames[condname]
		if !ok {
			p.fail("unknown group name "+strconv.Quote(condname), len([]rune(condname))+1)
		}
		cond = g
	} else {
		n, err := strconv.ParseUint(condname, 10, 64)
		if err != nil || n >= pyMaxGroups {
			p.fail("invalid group reference "+condname, len(condname)+1)
		}
		if n == 0 {
			p.fail("bad group number", len(condname)+1)
		}
		cond = int(n)
		if _, ok := p.grouprefpos[cond]; !ok {
			p.grouprefpos[cond] = p.tell() - len(condname) - 1
		}
	}
	p.checkLookbehindGroup(cond)
	yes := seqItem(p.parse(ctx, verbose, nested+1, false))
	var no *pyItem
	if p.match("|") {
		n := seqItem(p.parse(ctx, verbose, nested+1, false))
		no = &n
		if p.next == "|" {
			p.fail("conditional backref with more than two branches", 0)
		}
	}
	if !p.match(")") {
		p.fail("missing ), unterminated subpattern", p.tell()-start)
	}
	it := &pyItem{op: opOther, atom: true}
	if no != nil {
		it.out = fmt.Sprintf("(?(%d)%s|%s)", cond, yes.out, no.out)
		it.lo, it.hi = min(yes.lo, no.lo), max(yes.hi, no.hi)
	} else {
		it.out = fmt.Sprintf("(?(%d)%s|)", cond, yes.out)
		it.lo, it.hi = 0, yes.hi
	}
	return it
}

func isASCIIDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (p *pyParser) groupRef(gid int) *pyItem {
	w := p.groupWidths[gid]
	return &pyItem{op: opOther, out: fmt.Sprintf(`\k<%d>`, gid), atom: true, lo: w[0], hi: w[1]}
}

// literal is one character matched as itself (with IGNORECASE applied).
func (p *pyParser) literal(ctx pyCtx, c rune) pyItem {
	f := p.eff(ctx)
	if f&IgnoreCase != 0 && f&ASCII == 0 {
		lo := unicode.ToLower(c)
		if fx, ok := caseFix[lo]; ok {
			var b strings.Builder
			b.WriteByte('[')
			b.WriteString(escClassRune(lo))
			for _, r := range fx {
				b.WriteString(escClassRune(r))
			}
			b.WriteByte(']')
			return pyItem{op: opUnit, out: b.String(), atom: true, lo: 1, hi: 1}
		}
	}
	if f&IgnoreCase != 0 && f&ASCII != 0 {
		// Under (?a), IGNORECASE folds ASCII letters only; regexp2's own
		// folding is Unicode-wide, so it is turned off here.
		out := escLitRune(c)
		if sw := swapASCIICase(c); sw != c {
			out = "[" + string(c) + string(sw) + "]"
		}
		return pyItem{op: opUnit, out: "(?-i:" + out + ")", atom: true, lo: 1, hi: 1}
	}
	return pyItem{op: opUnit, out: escLitRune(c), atom: true, lo: 1, hi: 1}
}

// swapASCIICase maps an ASCII letter to its other case and returns any
// other character as it is.
func swapASCIICase(c rune) rune {
	switch {
	case c >= 'a' && c <= 'z':
		return c - 'a' + 'A'
	case c >= 'A' && c <= 'Z':
		return c - 'A' + 'a'
	}
	return c
}

// asciiCaseClosure returns the other-case forms of the ASCII letters in
// lo..hi.
func asciiCaseClosure(lo, hi rune) [][2]rune {
	var out [][2]rune
	for _, span := range [][2]rune{{'A', 'Z'}, {'a', 'z'}} {
		a, b := max(lo, span[0]), min(hi, span[1])
		if a <= b {
			out = append(out, [2]rune{swapASCIICase(a), swapASCIICase(b)})
		}
	}
	return out
}

func escLitRune(r rune) string {
	switch {
	case r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'):
		return string(r)
	case r < 0x10000:
		return fmt.Sprintf(`\u%04X`, r)
	}
	return string(r)
}

func escClassRune(r rune) string {
	if r < 0x10000 {
		return fmt.Sprintf(`\u%04X`, r)
	}
	return string(r)
}

// pyCategory is one of \d \D \s \S \w \W.
type pyCategory byte

// setItem is one member of a character set: a range (lo == hi for one
// character) or a category.
type setItem struct {
	lo, hi rune
	cat    pyCategory // 0 for a range
}

var (
	asciiDigit = [][2]rune{{'0', '9'}}
	asciiWord  = [][2]rune{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	asciiSpace = [][2]rune{{'\t', '\r'}, {' ', ' '}}
)

const (
	uniWordClass    = `[\p{L}\p{N}_]`
	uniNonWordClass = `[^\p{L}\p{N}_]`
)

// complement returns the characters not in the sorted, disjoint ranges.
func complement(rs [][2]rune) [][2]rune {
	var out [][2]rune
	next := rune(0)
	for _, r := range rs {
		if r[0] > next {
			out = append(out, [2]rune{next, r[0] - 1})
		}
		next = r[1] + 1
	}
	if next <= unicode.MaxRune {
		out = append(out, [2]rune{next, unicode.MaxRune})
	}
	return out
}

func writeRanges(b *strings.Builder, rs [][2]rune) {
	for _, r := range rs {
		b.WriteString(escClassRune(r[0]))
		if r[1] != r[0] {
			b.WriteByte('-')
			b.WriteString(escClassRune(r[1]))
		}
	}
}

// emitSet writes a Python character set as .NET.
func (p *pyParser) emitSet(ctx pyCtx, items []setItem, negate bool) pyItem {
	f := p.eff(ctx)
	ascii := f&ASCII != 0
	fold := f&IgnoreCase != 0 && !ascii
	asciiFold := f&IgnoreCase != 0 && ascii
	var b strings.Builder
	nonWord := false
	var extra []rune
	for _, it := range items {
		switch it.cat {
		case 0:
			writeRanges(&b, [][2]rune{{it.lo, it.hi}})
			if fold {
				extra = append(extra, caseFixesInRange(it.lo, it.hi)...)
			}
			if asciiFold {
				writeRanges(&b, asciiCaseClosure(it.lo, it.hi))
			}
		case 'd':
			if ascii {
				writeRanges(&b, asciiDigit)
			} else {
				b.WriteString(`\p{Nd}`)
			}
		case 'D':
			if ascii {
				writeRanges(&b, complement(asciiDigit))
			} else {
				b.WriteString(`\P{Nd}`)
			}
		case 's':
			if ascii {
				writeRanges(&b, asciiSpace)
			} else {
				writeRanges(&b, spaceRanges)
			}
		case 'S':
			if ascii {
				writeRanges(&b, complement(asciiSpace))
			} else {
				writeRanges(&b, complement(spaceRanges))
			}
		case 'w':
			if ascii {
				writeRanges(&b, asciiWord)
			} else {
				b.WriteString(`\p{L}\p{N}_`)
			}
		case 'W':
			if ascii {
				writeRanges(&b, complement(asciiWord))
			} else {
				nonWord = true
			}
		}
	}
	for _, r := range extra {
		b.WriteString(escClassRune(r))
	}
	body := b.String()
	it := pyItem{op: opUnit, atom: true, lo: 1, hi: 1}
	switch {
	case !nonWord && negate:
		it.out = "[^" + body + "]"
	case !nonWord:
		it.out = "[" + body + "]"
	case body == "" && negate:
		it.out = uniWordClass
	case body == "":
		it.out = uniNonWordClass
	case negate:
		it.out = "(?:(?![" + body + "])" + uniWordClass + ")"
	default:
		it.out = "(?:[" + body + "]|" + uniNonWordClass + ")"
	}
	if asciiFold {
		it.out = "(?-i:" + it.out + ")"
	}
	return it
}

// caseFixesInRange returns the re._casefix companions Python adds to a
// set under IGNORECASE for the characters lo..hi.
func caseFixesInRange(lo, hi rune) []rune {
	var out []rune
	if hi-lo < 64 {
		for c := lo; c <= hi; c++ {
			if fx, ok := caseFix[unicode.ToLower(c)]; ok {
				out = append(out, unicode.ToLower(c))
				out = append(out, fx...)
			}
		}
		return out
	}
	for k, fx := range caseFix {
		for c := unicode.SimpleFold(k); ; c = unicode.SimpleFold(c) {
			if c >= lo && c <= hi && unicode.ToLower(c) == k {
				out = append(out, k)
				out = append(out, fx...)
				break
			}
			if c == k {
				break
			}
		}
	}
	return out
}

// class parses a set after "[".
func (p *pyParser) class(ctx pyCtx) pyItem {
	here := p.tell() - 1
	negate := p.match("^")
	var set []setItem
	for {
		this := p.get()
		if this == "" {
			p.fail("unterminated character set", p.tell()-here)
		}
		if this == "]" && len(set) > 0 {
			break
		}
		var code1 setItem
		if this[0] == '\\' {
			code1 = p.classEscape(this)
		} else {
			c := []rune(this)[0]
			code1 = setItem{lo: c, hi: c}
		}
		if p.match("-") {
			that := p.get()
			if that == "" {
				p.fail("unterminated character set", p.tell()-here)
			}
			if that == "]" {
				set = append(set, code1, setItem{lo: '-', hi: '-'})
				break
			}
			var code2 setItem
			if that[0] == '\\' {
				code2 = p.classEscape(that)
			} else {
				c := []rune(that)[0]
				code2 = setItem{lo: c, hi: c}
			}
			if code1.cat != 0 || code2.cat != 0 || code2.lo < code1.lo {
				p.fail("bad character range "+this+"-"+that, len([]rune(this))+1+len([]rune(that)))
			}
			set = append(set, setItem{lo: code1.lo, hi: code2.lo})
			continue
		}
		set = append(set, code1)
	}
	if len(set) == 1 && set[0].cat == 0 && set[0].lo == set[0].hi && !negate {
		return p.literal(ctx, set[0].lo)
	}
	return p.emitSet(ctx, set, negate)
}

// hexEscape reads the digits of \x, \u or \U after the escape token.
func (p *pyParser) hexEscape(esc string, n int) rune {
	digits := p.getWhile(n, "0123456789abcdefABCDEF")
	if len(digits) != n {
		p.fail("incomplete escape "+esc+digits, len(esc)+len(digits))
	}
	v, _ := strconv.ParseUint(digits, 16, 32)
	if v > unicode.MaxRune {
		p.fail("bad escape "+esc+digits, len(esc)+len(digits))
	}
	return rune(v)
}

// namedEscape reads the {name} of a \N escape and returns the character
// it names, as Python's unicodedata.lookup finds it: a character name or
// a name alias (LINE FEED) in any case, or an algorithmic Hangul syllable
// or CJK unified ideograph name in upper case. A named sequence names no
// single character and makes the pattern invalid, as in Python.
func (p *pyParser) namedEscape() rune {
	if !p.match("{") {
		p.fail("missing {", 0)
	}
	name := p.getUntil("}", "character name")
	r, ok := lookupCharName(name)
	if !ok {
		p.fail(fmt.Sprintf("undefined character name %q", name), len([]rune(name))+len(`\N{}`))
	}
	return r
}

// Hangul syllable composition (Unicode, chapter 3.12).
const (
	hangulBase  = 0xac00
	hangulVowel = 21
	hangulTail  = 28
)

var (
	hangulLeads  = strings.Split("G GG N D DD R M B BB S SS  J JJ C K T P H", " ")
	hangulVowels = strings.Split("A AE YA YAE EO E YEO YE O WA WAE OE YO U WEO WE WI YU EU YI I", " ")
	hangulTails  = strings.Split(" G GG GS N NJ NH D L LG LM LB LS LT LP LH M B BS S SS NG J C K T P H", " ")
)

// lookupCharName finds the character whose Unicode name is name.
func lookupCharName(name string) (rune, bool) {
	if rest, ok := strings.CutPrefix(name, "HANGUL SYLLABLE "); ok {
		for l, lead := range hangulLeads {
			if !strings.HasPrefix(rest, lead) {
				continue
			}
			for v, vowel := range hangulVowels {
				if !strings.HasPrefix(rest[len(lead):], vowel) {
					continue
				}
				for t, tail := range hangulTails {
					if rest == lead+vowel+tail {
						return rune(hangulBase + (l*hangulVowel+v)*hangulTail + t), true
					}
				}
			}
		}
		return 0, false
	}
	if hex, ok := strings.CutPrefix(name, "CJK UNIFIED IDEOGRAPH-"); ok {
		if (len(hex) != 4 && len(hex) != 5) || strings.ToUpper(hex) != hex {
			return 0, false
		}
		v, err := strconv.ParseUint(hex, 16, 32)
		if err != nil || !strings.HasPrefix(runenames.Name(rune(v)), "<CJK Ideograph") {
			return 0, false
		}
		return rune(v), true
	}
	upper := strings.ToUpper(name)
	if upper == "" || strings.HasPrefix(upper, "<") {
		return 0, false
	}
	if r, ok := charNameAliases[upper]; ok {
		return r, true
	}
	r, ok := charNames()[upper]
	return r, ok
}

// charNames indexes the characters by their names, built on first use
// and never changed after.
var charNames = sync.OnceValue(func() map[string]rune {
	names := make(map[string]rune, 1<<16)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if n := runenames.Name(r); n != "" && n[0] != '<' {
			names[n] = r
		}
	}
	return names
})

var pyEscapes = map[byte]rune{'a': '\a', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v', '\\': '\\'}

func isASCIILetter(r rune) bool { return r < 0x80 && unicode.IsLetter(r) }

// classEscape is an escape inside a set.
func (p *pyParser) classEscape(esc string) setItem {
	c := []rune(esc)[1]
	lit := func(r rune) setItem { return setItem{lo: r, hi: r} }
	if c == 'b' {
		return lit('\b')
	}
	if c < 0x80 {
		if r, ok := pyEscapes[byte(c)]; ok {
			return lit(r)
		}
	}
	switch c {
	case 'd', 'D', 's', 'S', 'w', 'W':
		return setItem{cat: pyCategory(c)}
	case 'x':
		return lit(p.hexEscape(esc, 2))
	case 'u':
		return lit(p.hexEscape(esc, 4))
	case 'U':
		return lit(p.hexEscape(esc, 8))
	case 'N':
		return lit(p.namedEscape())
	}
	if c >= '0' && c <= '7' {
		digits := esc[1:] + p.getWhile(2, "01234567")
		v, _ := strconv.ParseUint(digits, 8, 32)
		if v > 0o377 {
			p.fail("octal escape value \\"+digits+" outside of range 0-0o377", len(digits)+1)
		}
		return lit(rune(v))
	}
	if c == '8' || c == '9' || isASCIILetter(c) {
		p.fail("bad escape "+esc, len([]rune(esc)))
	}
	return lit(c)
}

// wordBoundary writes \b (or \B when not) for the word set in effect.
func wordBoundary(ascii, not bool) string {
	w := uniWordClass
	if ascii {
		w = `[0-9A-Z_a-z]`
	}
	// Python tests the characters themselves, without case folding.
	if not {
		// Python's \B does not match in an empty string.
		return "(?-i:(?<=" + w + ")(?=" + w + ")|(?<!" + w + ")(?!" + w + ")(?!\\A\\z))"
	}
	return "(?-i:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))"
}

// escape is an escape outside a set.
func (p *pyParser) escape(ctx pyCtx, esc string) pyItem {
	c := []rune(esc)[1]
	f := p.eff(ctx)
	at := func(out string) pyItem { return pyItem{op: opAt, out: out} }
	switch c {
	case 'A':
		return at(`\A`)
	case 'Z':
		return at(`\z`)
	case 'b':
		return at(wordBoundary(f&ASCII != 0, false))
	case 'B':
		return at(wordBoundary(f&ASCII != 0, true))
	case 'd', 'D', 's', 'S', 'w', 'W':
		return p.emitSet(ctx, []setItem{{cat: pyCategory(c)}}, false)
	}
	if c < 0x80 {
		if r, ok := pyEscapes[byte(c)]; ok {
			return p.literal(ctx, r)
		}
	}
	switch c {
	case 'x':
		return p.literal(ctx, p.hexEscape(esc, 2))
	case 'u':
		return p.literal(ctx, p.hexEscape(esc, 4))
	case 'U':
		return p.literal(ctx, p.hexEscape(esc, 8))
	case 'N':
		return p.literal(ctx, p.namedEscape())
	case '0':
		digits := "0" + p.getWhile(2, "01234567")
		v, _ := strconv.ParseUint(digits, 8, 32)
		return p.literal(ctx, rune(v))
	}
	if c >= '1' && c <= '9' {
		digits := string(c)
		if isASCIIDigitTok(p.next) {
			digits += p.get()
			if isOct(digits[0]) && isOct(digits[1]) && len(p.next) == 1 && isOct(p.next[0]) {
				digits += p.get()
				v, _ := strconv.ParseUint(digits, 8, 32)
				if v > 0o377 {
					p.fail("octal escape value \\"+digits+" outside of range 0-0o377", len(digits)+1)
				}
				return p.literal(ctx, rune(v))
			}
		}
		g, _ := strconv.Atoi(digits)
		if g < len(p.groupWidths) {
			if !p.checkGroup(g) {
				p.fail("cannot refer to an open group", len(digits)+1)
			}
			p.checkLookbehindGroup(g)
			return *p.groupRef(g)
		}
		p.fail(fmt.Sprintf("invalid group reference %d", g), len(digits))
	}
	if isASCIILetter(c) {
		p.fail("bad escape "+esc, len([]rune(esc)))
	}
	return p.literal(ctx, c)
}

func isOct(b byte) bool { return b >= '0' && b <= '7' }

// pyIsIdentifier is Python's str.isidentifier(): a letter-like character
// or "_" (XID_Start) followed by XID_Continue characters.
func pyIsIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if i == 0 {
			if !isXIDStart(r) {
				return false
			}
		} else if !isXIDContinue(r) {
			return false
		}
	}
	return true
}

func isXIDStart(r rune) bool {
	if r < 0x80 {
		return r == '_' || isASCIILetter(r)
	}
	switch r {
	case 0x37a, 0xe33, 0xeb3, 0x309b, 0x309c, 0xfc5e, 0xfc5f, 0xfc60, 0xfc61, 0xfc62, 0xfc63,
		0xfdfa, 0xfdfb, 0xfe70, 0xfe72, 0xfe74, 0xfe76, 0xfe78, 0xfe7a, 0xfe7c, 0xfe7e,
		0xff9e, 0xff9f:
		// ID_Start characters whose NFKC form does not start an
		// identifier, which XID_Start leaves out.
		return false
	case 0x2e2f: // VERTICAL TILDE: Lm but Pattern_Syntax
		return false
	}
	return unicode.In(r, unicode.L, unicode.Nl, unicode.Other_ID_Start)
}

func isXIDContinue(r rune) bool {
	if r < 0x80 {
		return r == '_' || isASCIILetter(r) || (r >= '0' && r <= '9')
	}
	switch r {
	case 0x37a, 0x309b, 0x309c, 0xfc5e, 0xfc5f, 0xfc60, 0xfc61, 0xfc62, 0xfc63,
		0xfdfa, 0xfdfb, 0xfe70, 0xfe72, 0xfe74, 0xfe76, 0xfe78, 0xfe7a, 0xfe7c, 0xfe7e:
		return false
	case 0x2e2f:
		return false
	case 0x200c, 0x200d, 0x30fb, 0xff65:
		// added to ID_Continue in Unicode 15.1
		return true
	}
	return unicode.In(r, unicode.L, unicode.Nl, unicode.Other_ID_Start,
		unicode.Mn, unicode.Mc, unicode.Nd, unicode.Pc, unicode.Other_ID_Continue)
}
