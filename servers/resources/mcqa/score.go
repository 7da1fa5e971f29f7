package mcqa

import (
	"github.com/gymlens/gymlens/servers/resources/internal/pyre"
	"github.com/gymlens/gymlens/servers/resources/internal/pystr"

	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"
)

// ServerName is the name of the resources server in a fleet
// configuration.
const ServerName = "mcqa"

// ReverifyMode is how `gym eval reverify` may treat this server upstream
// (REVERIFY_MODE): "stateless", i.e. a stored rollout can be scored again
// from the rollout alone, with no server-side state.
const ReverifyMode = "stateless"

// The grading modes, under their upstream names.
const (
	// ModeStrictSingleLetterBoxed reads one option letter from the last
	// \boxed{...} of the answer. It is the default.
	ModeStrictSingleLetterBoxed = "strict_single_letter_boxed"
	// ModeLenientBoxed is ModeStrictSingleLetterBoxed, falling back to
	// finding exactly one option's text inside the last \boxed{...}.
	ModeLenientBoxed = "lenient_boxed"
	// ModeLenientAnswerColon reads the first "Answer: ..." line: an
	// option letter or the exact text of an option.
	ModeLenientAnswerColon = "lenient_answer_colon"
	// ModeLenientAnswerColonMD reads the last "Answer: ..." payload that
	// names one option letter, tolerating Markdown emphasis. Only the
	// server configuration can select it; a task may not.
	ModeLenientAnswerColonMD = "lenient_answer_colon_md"
)

// DefaultGradingMode is the grading mode of a task that names none.
const DefaultGradingMode = ModeStrictSingleLetterBoxed

// ErrInvalidGradingMode is wrapped by the error Score returns for a
// grading mode outside the ones the configuration or the task may name.
// Upstream refuses such a configuration at start-up and such a request
// with a validation error (HTTP 422).
var ErrInvalidGradingMode = errors.New("mcqa: invalid grading mode")

// ErrUnsupportedPattern is wrapped by the error Score returns for an
// output_regex that Python accepts but this port cannot run: repetition
// counts or lookbehind widths beyond regexp2's 32-bit limits. It is
// pyre.ErrUnsupported.
var ErrUnsupportedPattern = pyre.ErrUnsupported

// Config is the server configuration of mcqa: the keys of upstream's
// MCQAResourcesServerConfig beyond those every resources server has
// (host, port, entrypoint, domain, name, ...).
type Config struct {
	// GradingMode, when not empty, overrides every task's grading_mode.
	// It may be any of the four modes. Empty (the default, upstream's
	// null) lets each task choose.
	GradingMode string `json:"grading_mode,omitempty" yaml:"grading_mode,omitempty"`
}

// Defaults returns the default configuration: no grading mode override.
func Defaults() Config { return Config{} }

// Validate reports a configuration upstream would refuse to start with.
func (c Config) Validate() error {
	switch c.GradingMode {
	case "", ModeStrictSingleLetterBoxed, ModeLenientBoxed, ModeLenientAnswerColon, ModeLenientAnswerColonMD:
		return nil
	}
	return fmt.Errorf("%w: config grading_mode %q", ErrInvalidGradingMode, c.GradingMode)
}

// Option is one option of a question: its letter (the key of an options
// object) and its text.
type Option struct {
	Letter string
	Text   string
}

// Options is one options object: its letters and texts in the object's
// order, null texts left out.
type Options []Option

// OptionList is a task's answer options: a list of objects that each map
// an option letter to its text, normally one letter per object, as in
// [{"A": "Karyotyping"}, {"B": "PCR"}].
//
// Upstream allows null option texts and ignores the letters they belong
// to (data sets exported through Arrow pad every object with all the
// letters of the data set, most of them null). Decoding JSON into an
// OptionList therefore drops null values: a letter is an option only
// where some object gives it a text. The keys of an object keep their
// JSON order, which decides between two options of one object whose
// texts are the same, as in Python's dicts; a key given twice keeps the
// place of its first occurrence and the value of its last.
type OptionList []Options

// UnmarshalJSON decodes a JSON list of objects whose values are strings
// or null, dropping the null values.
func (o *OptionList) UnmarshalJSON(data []byte) error {
	var raw []map[string]*string
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if raw == nil {
		*o = nil
		return nil
	}
	var objects []json.RawMessage
	if err := json.Unmarshal(data, &objects); err != nil {
		return err
	}
	out := make(OptionList, len(raw))
	for i, entry := range raw {
		if entry == nil {
			return fmt.Errorf("mcqa: options[%d] is null, not an object", i)
		}
		keys, err := objectKeys(objects[i])
		if err != nil {
			return fmt.Errorf("mcqa: options[%d]: %w", i, err)
		}
		opts := make(Options, 0, len(entry))
		for _, k := range keys {
			if v := entry[k]; v != nil {
				opts = append(opts, Option{Letter: k, Text: *v})
			}
		}
		out[i] = opts
	}
	*o = out
	return nil
}

// MarshalJSON writes the list as JSON objects, each with its options in
// order.
func (o OptionList) MarshalJSON() ([]byte, error) {
	if o == nil {
		return []byte("null"), nil
	}
	b := []byte{'['}
	for i, entry := range o {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		for j, opt := range entry {
			if j > 0 {
				b = append(b, ',')
			}
			k, err := json.Marshal(opt.Letter)
			if err != nil {
				return nil, err
			}
			v, err := json.Marshal(opt.Text)
			if err != nil {
				return nil, err
			}
			b = append(append(append(b, k...), ':'), v...)
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// objectKeys lists the keys of a JSON object in order, each once, at the
// place of its first occurrence.
func objectKeys(obj []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var keys []string
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := tok.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// Task holds the per-task fields of an mcqa data set row (upstream's
// MCQARunRequest), apart from responses_create_params, which is the
// model's prompt and plays no part in scoring.
type Task struct {
	// UUID identifies the question; it is carried along, not graded.
	UUID *string `json:"uuid"`
	// Options are the answer options; their letters are the answers that
	// can be accepted.
	Options OptionList `json:"options"`
	// ExpectedAnswer is the letter of the right option. Surrounding
	// whitespace and case do not matter. Without it no answer earns a
	// reward.
	ExpectedAnswer *string `json:"expected_answer"`
	// Metadata is free-form data about the task; it is not graded.
	Metadata map[string]any `json:"metadata"`
	// GradingMode selects how the answer letter is read: one of
	// ModeStrictSingleLetterBoxed, ModeLenientBoxed and
	// ModeLenientAnswerColon. Empty means DefaultGradingMode.
	GradingMode string `json:"grading_mode,omitempty"`
	// TemplateMetadata describes the prompt template the task was made
	// with. Its key "output_regex", a Python regular expression or a
	// list of them, takes precedence over GradingMode when present.
	TemplateMetadata map[string]any `json:"template_metadata"`

	// regexOrder is the JSON order of the keys of an output_regex given
	// as an object, when the task was read from JSON (SetTemplateJSON).
	regexOrder []string
}

// SetTemplateJSON records what only the JSON text of template_metadata
// tells: the order of the keys of an output_regex given as an object,
// which upstream tries in that order. Without it they are tried in
// sorted order. raw that is not such an object changes nothing.
func (t *Task) SetTemplateJSON(raw []byte) {
	var meta map[string]json.RawMessage
	if json.Unmarshal(raw, &meta) != nil {
		return
	}
	spec, ok := meta["output_regex"]
	if !ok {
		return
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(spec, &obj) != nil || obj == nil {
		return
	}
	if keys, err := objectKeys(spec); err == nil {
		t.regexOrder = keys
	}
}

// DefaultTask returns a Task holding upstream's defaults, to decode a row
// into: no options, no expected answer, DefaultGradingMode.
func DefaultTask() Task { return Task{GradingMode: DefaultGradingMode} }

// Result is the outcome of scoring one answer.
type Result struct {
	// Reward is 1 when the extracted letter equals the expected one, else 0.
	Reward float64
	// ExpectedAnswer is the task's expected answer as compared: stripped
	// of whitespace and upper-cased; empty when the task has none.
	ExpectedAnswer string
	// ExtractedAnswer is the option letter read from the answer, nil when
	// none could be read.
	ExtractedAnswer *string
	// GradingMode is the grading mode that applied.
	GradingMode string
}

// Fields returns the keys upstream's verify response (MCQAVerifyResponse)
// adds to the request it echoes, besides reward: "expected_answer" (the
// normalised expected answer, a string) and "extracted_answer" (a string,
// or nil for JSON null).
func (r Result) Fields() map[string]any {
	var extracted any
	if r.ExtractedAnswer != nil {
		extracted = *r.ExtractedAnswer
	}
	return map[string]any{
		"expected_answer":  r.ExpectedAnswer,
		"extracted_answer": extracted,
	}
}

// Score grades outputText, the model's answer, for task under cfg.
//
// outputText must be built as upstream's response.output_text (the
// openai-python Response.output_text property): the text of every content
// part of type "output_text" of every output item of type "message", in
// order, concatenated without a separator; reasoning, tool calls and
// refusals contribute nothing. Score strips surrounding whitespace itself.
//
// The error is non-nil only for a grading mode outside the ones the
// configuration or the task may name (ErrInvalidGradingMode), and for an
// output_regex this port cannot run (ErrUnsupportedPattern). Where
// upstream's verifier raises on a task its request model accepts, Score
// scores instead; see the package documentation.
func Score(cfg Config, task Task, outputText string) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	switch task.GradingMode {
	case "", ModeStrictSingleLetterBoxed, ModeLenientBoxed, ModeLenientAnswerColon:
	default:
		return Result{}, fmt.Errorf("%w: task grading_mode %q", ErrInvalidGradingMode, task.GradingMode)
	}
	mode := cmp.Or(cfg.GradingMode, task.GradingMode, DefaultGradingMode)

	var gold string
	if task.ExpectedAnswer != nil {
		gold = pyUpper(pystr.Strip(*task.ExpectedAnswer))
	}
	res := Result{ExpectedAnswer: gold, GradingMode: mode}
	allowed := allowedLetters(task.Options)

	text := pystr.Strip(outputText)
	if text == "" {
		return res, nil
	}

	var pred *string
	if spec, ok := task.TemplateMetadata["output_regex"]; ok {
		var err error
		pred, err = customRegexes(text, spec, task.regexOrder, allowed, task.Options)
		if err != nil {
			return Result{}, err
		}
	}
	if pred == nil {
		switch mode {
		case ModeStrictSingleLetterBoxed:
			pred = strictBoxedLetter(text, allowed)
		case ModeLenientBoxed:
			pred = strictBoxedLetter(text, allowed)
			if pred == nil {
				pred = boxedOptionText(text, task.Options, allowed)
			}
		case ModeLenientAnswerColon:
			pred = answerColon(text, task.Options, allowed)
		case ModeLenientAnswerColonMD:
			prefix := answerPrefix(task.TemplateMetadata)
			pred = answerColonMarkdown(text, prefix, allowed)
			if pred == nil && prefix != "" {
				pred = strictBoxedLetter(text, allowed)
			}
		}
	}
	res.ExtractedAnswer = pred
	if pred != nil && gold != "" && *pred == gold {
		res.Reward = 1
	}
	return res, nil
}

// allowedLetters is the set of upper-cased option keys that are a single
// letter and have a text.
func allowedLetters(options OptionList) map[string]bool {
	letters := make(map[string]bool)
	for _, entry := range options {
		for _, o := range entry {
			if r := []rune(o.Letter); len(r) == 1 && pyIsAlpha(r[0]) {
				letters[pyUpper(o.Letter)] = true
			}
		}
	}
	return letters
}

// pySpaceClass is the body of a Go regexp character class matching what
// Python's \s matches in a str pattern.
const pySpaceClass = `\t-\r\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`

// The upstream patterns without lookaround run on Go's regexp, with
// Python's \s spelled out (Go's \s is ASCII only and lacks \v).
// Python's fullmatch and match become ^...$ and ^....
var (
	latexTextWrap      = regexp.MustCompile(`^(?s:\\text\{[` + pySpaceClass + `]*(.*?)[` + pySpaceClass + `]*\})$`)
	boxedLetterOnly    = regexp.MustCompile(`^[^A-Za-z]*([A-Z])[^A-Za-z]*$`)
	boxedLetterLabel   = regexp.MustCompile(`^[` + pySpaceClass + `]*([A-Z])[` + pySpaceClass + `]*[:).\-]`)
	answerColonRe      = regexp.MustCompile(`(?i)answer[` + pySpaceClass + `]*:[` + pySpaceClass + `]*(.+)`)
	answerColonPayload = regexp.MustCompile(`(?im)[*_]{0,2}Answer[*_]{0,2}[` + pySpaceClass + `]*:[*_` + pySpaceClass + `]{0,2}(.+)`)
	choiceListSep      = regexp.MustCompile(`^(?i:[` + pySpaceClass + `]*[/|&,;][` + pySpaceClass + `]*|[` +
		pySpaceClass + `]+(?:or|and)[` + pySpaceClass + `]+|[` + pySpaceClass + `]+)$`)
)

// The upstream patterns with lookaround run as Python patterns on
// regexp2.
var (
	choiceLetter          = pyre.MustCompile(`(?<![A-Za-z])([A-Za-z])(?![A-Za-z])`, 0)
	leadingChoiceLetter   = pyre.MustCompile(`^([a-zA-Z])(?![a-zA-Z0-9])`, 0)
	lastStandaloneLetter  = pyre.MustCompile(`\b[A-Z]\b(?!.*\b[A-Z]\b)`, pyre.DotAll)
	extractedAnswerFolder = strings.NewReplacer(
		// Arabic, Bengali and full-width option letters
		"أ", " A", "ب", " B", "ج", " C", "د", " D",
		"অ", " A", "ব", " B", "ড", " C", "ঢ", " D",
		"Ａ", " A", "Ｂ", " B", "Ｃ", " C", "Ｄ", " D",
	)
)

// boxedContent returns what lies between the last `\boxed{` of text and
// the brace that closes it, counting nested braces; ok is false when
// there is no `\boxed{` or it is never closed.
func boxedContent(text string) (inner string, ok bool) {
	const marker = `\boxed{`
	start := strings.LastIndex(text, marker)
	if start < 0 {
		return "", false
	}
	rest := text[start+len(marker):]
	depth := 1
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return rest[:i], true
			}
		}
	}
	return "", false
}

// unwrapText removes \text{...} wrappers around the whole of s, as many
// as there are, with the whitespace just inside each.
func unwrapText(s string) string {
	for {
		m := latexTextWrap.FindStringSubmatch(s)
		if m == nil {
			return s
		}
		s = m[1]
	}
}

// normalizeForMatch lower-cases s and collapses its whitespace runs into
// single spaces, trimming both ends.
func normalizeForMatch(s string) string {
	return strings.Join(pySplit(pystr.Lower(s)), " ")
}

// normalizeExtracted NFKC-normalises s, turns a few non-Latin option
// letters into Latin ones and strips whitespace.
func normalizeExtracted(s string) string {
	return pystr.Strip(extractedAnswerFolder.Replace(norm.NFKC.String(s)))
}

func ptr(s string) *string { return &s }

// strictBoxedLetter reads the answer letter from the last \boxed{...}:
// once \text{} wrappers are gone, the content must be one upper-case
// letter with no other ASCII letter around it, or start with an
// upper-case letter followed by one of ":).-" (the option text after it
// is ignored). The letter must be one of the options.
func strictBoxedLetter(text string, allowed map[string]bool) *string {
	inner, ok := boxedContent(text)
	if !ok {
		return nil
	}
	inner = unwrapText(pystr.Strip(inner))
	m := boxedLetterOnly.FindStringSubmatch(inner)
	if m == nil {
		m = boxedLetterLabel.FindStringSubmatch(inner)
	}
	if m == nil || !allowed[m[1]] {
		return nil
	}
	return ptr(m[1])
}

// boxedOptionText finds the options whose normalised text occurs in the
// normalised content of the last \boxed{...} (taken with and without its
// \text{} wrappers), and returns the letter when exactly one does.
func boxedOptionText(text string, options OptionList, allowed map[string]bool) *string {
	inner, ok := boxedContent(text)
	if !ok {
		return nil
	}
	inner = pystr.Strip(inner)
	candidates := [2]string{normalizeForMatch(inner), normalizeForMatch(unwrapText(inner))}
	type option struct{ letter, text string }
	var opts []option
	for _, entry := range options {
		for _, o := range entry {
			if pyLen(o.Letter) == 1 && allowed[pyUpper(o.Letter)] {
				opts = append(opts, option{pyUpper(o.Letter), normalizeForMatch(o.Text)})
			}
		}
	}
	var found string
	for _, c := range candidates {
		for _, o := range opts {
			if o.text == "" || !strings.Contains(c, o.text) {
				continue
			}
			if found != "" && found != o.letter {
				return nil
			}
			found = o.letter
		}
	}
	if found == "" {
		return nil
	}
	return ptr(found)
}

// optionWithText returns the first option letter (allowed) whose
// normalised text equals norm.
func optionWithText(options OptionList, allowed map[string]bool, norm string) *string {
	for _, entry := range options {
		for _, o := range entry {
			if up := pyUpper(o.Letter); allowed[up] && normalizeForMatch(o.Text) == norm {
				return ptr(up)
			}
		}
	}
	return nil
}

// answerColon reads what follows the first "answer:" (any case) up to the
// end of its line: a single option letter, or else the text of an option.
func answerColon(text string, options OptionList, allowed map[string]bool) *string {
	m := answerColonRe.FindStringSubmatch(text)
	if m == nil {
		return nil
	}
	candidate := pystr.Strip(unwrapText(m[1]))
	if r := []rune(candidate); len(r) == 1 && pyIsAlpha(r[0]) {
		if up := pyUpper(candidate); allowed[up] {
			return ptr(up)
		}
	}
	return optionWithText(options, allowed, normalizeForMatch(candidate))
}

// answerPrefix is template_metadata.answer_prefix, "" when it is absent,
// empty or not a string. Upstream raises on a prefix that is not a string
// (other than an empty or null one); this port ignores it.
func answerPrefix(meta map[string]any) string {
	p, _ := meta["answer_prefix"].(string)
	return p
}

// answerPayloads collects the final-answer payloads of text once it is
// NFKC-normalised: what follows each "Answer:" (Markdown emphasis
// allowed around the word and the colon) to the end of its line, and,
// when prefix is not empty, what follows each occurrence of the
// normalised prefix (any case) and the whitespace after it, to the next
// newline. They come in the order of their starts, an "Answer:" payload
// before a prefix payload that starts at the same place.
func answerPayloads(text, prefix string) []string {
	text = norm.NFKC.String(text)
	type payload struct {
		start   int // in bytes of text
		payload string
	}
	var found []payload
	for _, m := range answerColonPayload.FindAllStringSubmatchIndex(text, -1) {
		found = append(found, payload{m[0], text[m[2]:m[3]]})
	}
	if prefix != "" {
		re, err := pyre.CompileCached(pyre.Escape(norm.NFKC.String(prefix))+`\s*`, pyre.IgnoreCase)
		if err == nil {
			runes := []rune(text)
			offsets := make([]int, len(runes)+1) // rune index -> byte offset
			for i, n := 0, 0; i < len(runes); i++ {
				offsets[i] = n
				n += utf8.RuneLen(runes[i])
				offsets[i+1] = n
			}
			_ = re.FindAll(runes, func(m *regexp2.Match) bool {
				start, end := offsets[m.Index], offsets[m.Index+m.Length]
				lineEnd := strings.IndexByte(text[end:], '\n')
				if lineEnd < 0 {
					lineEnd = len(text)
				} else {
					lineEnd += end
				}
				found = append(found, payload{start, text[end:lineEnd]})
				return true
			})
		}
	}
	slices.SortStableFunc(found, func(a, b payload) int { return cmp.Compare(a.start, b.start) })
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.payload
	}
	return out
}

// answerColonMarkdown tries the answer payloads (answerPayloads) from the
// last one back, and returns the first single choice letter found.
func answerColonMarkdown(text, prefix string, allowed map[string]bool) *string {
	payloads := answerPayloads(text, prefix)
	for i := len(payloads) - 1; i >= 0; i-- {
		if letter := choiceFromPayload(payloads[i], allowed); letter != nil {
			return letter
		}
	}
	return nil
}

// choiceFromPayload reads one option letter from an "Answer:" payload:
// the payload itself when it is one character, else a leading letter not
// followed by a letter or digit, else the last standalone capital. A
// payload listing two different options ("A or B", "A, C") names none.
func choiceFromPayload(payload string, allowed map[string]bool) *string {
	candidate := pyStripChars(pystr.Strip(normalizeExtracted(payload)), "*_` \t\n\r.,;:")
	runes := []rune(candidate)
	if listsSeveralChoices(runes, allowed) {
		return nil
	}
	var letter string
	if len(runes) == 1 {
		letter = candidate
	} else if m, _ := leadingChoiceLetter.Search(runes); m != nil {
		letter = m.GroupByNumber(1).String()
	} else if m, _ := lastStandaloneLetter.Search(runes); m != nil {
		letter = m.String()
	}
	if letter == "" {
		return nil
	}
	if up := pyUpper(letter); allowed[up] {
		return ptr(up)
	}
	return nil
}

// listsSeveralChoices reports whether two consecutive standalone option
// letters of text differ and are separated only by a list separator
// (punctuation, "or", "and" or whitespace).
func listsSeveralChoices(text []rune, allowed map[string]bool) bool {
	type hit struct {
		letter     string
		start, end int
	}
	var hits []hit
	_ = choiceLetter.FindAll(text, func(m *regexp2.Match) bool {
		g := m.GroupByNumber(1)
		if up := pyUpper(g.String()); allowed[up] {
			hits = append(hits, hit{up, g.Index, g.Index + g.Length})
		}
		return true
	})
	for i := 0; i+1 < len(hits); i++ {
		l, r := hits[i], hits[i+1]
		if l.letter != r.letter && choiceListSep.MatchString(string(text[l.end:r.start])) {
			return true
		}
	}
	return false
}

// customRegexes applies template_metadata.output_regex: one pattern, or a
// list of them tried in order until one yields an answer. Upstream
// raises on a value it cannot use as a pattern (null, a number, a list
// entry that is not a string); this port skips it.
func customRegexes(text string, spec any, order []string, allowed map[string]bool, options OptionList) (*string, error) {
	var patterns []any
	switch v := spec.(type) {
	case string:
		return customRegex(text, v, allowed, options)
	case []any:
		patterns = v
	case map[string]any:
		// Python iterates a dict's keys in insertion order: the JSON
		// order when it is known, else sorted order.
		keys := order
		if len(keys) != len(v) {
			keys = slices.Sorted(maps.Keys(v))
		}
		for _, k := range keys {
			patterns = append(patterns, k)
		}
	}
	for _, p := range patterns {
		s, ok := p.(string)
		if !ok {
			continue
		}
		pred, err := customRegex(text, s, allowed, options)
		if err != nil || pred != nil {
			return pred, err
		}
	}
	return nil, nil
}

// customRegex applies one output_regex pattern, case-insensitively: the
// last of its matches (its group 1 when it has one) is the answer, when
// it is a single letter (options or not) or the text of an option.
func customRegex(text, pattern string, allowed map[string]bool, options OptionList) (*string, error) {
	re, err := pyre.CompileCached(pattern, pyre.IgnoreCase)
	if err != nil {
		var pe *pyre.PatternError
		var raised *pyre.RaisedError
		if errors.As(err, &pe) || errors.As(err, &raised) {
			// Upstream catches re.error; it raises the other exceptions
			// of re.compile, and this port skips the pattern instead.
			return nil, nil
		}
		return nil, fmt.Errorf("mcqa: %w", err)
	}
	var last *regexp2.Match
	if err := re.FindAll([]rune(text), func(m *regexp2.Match) bool {
		last = m
		return true
	}); err != nil {
		return nil, fmt.Errorf("mcqa: output_regex %q: %w", pattern, err)
	}
	if last == nil {
		return nil, nil
	}
	var s string
	switch re.Groups() {
	case 0:
		s = last.String()
	case 1:
		s = last.GroupByNumber(1).String()
	default:
		// Upstream's matches are tuples then, and it raises; this port
		// takes nothing from the pattern.
		return nil, nil
	}
	captured := pyUpper(normalizeExtracted(pystr.Strip(s)))
	if r := []rune(captured); len(r) == 1 && pyIsAlpha(r[0]) {
		return ptr(captured), nil
	}
	return optionWithText(options, allowed, normalizeForMatch(captured)), nil
}
