package mcqa

import (
	"github.com/gymlens/gymlens/servers/resources/internal/pystr"

	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/dlclark/regexp2"
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

// ErrInvalidOutputRegex is wrapped by the error Score returns where
// upstream's template_metadata.output_regex handling raises (and the
// verify request fails with HTTP 500): an output_regex that is neither a
// string nor a list (or object) of strings; a pattern with two or more
// groups that matches the answer; a pattern on which Python's re.compile
// raises something other than re.error (a repetition count of 2**32-1 or
// more, the flags (?a) and (?u) together). A pattern that is merely
// invalid is not an error: upstream skips it, and so does Score.
var ErrInvalidOutputRegex = errors.New("mcqa: output_regex cannot be evaluated")

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

// OptionList is a task's answer options: a list of objects that each map
// an option letter to its text, normally one letter per object, as in
// [{"A": "Karyotyping"}, {"B": "PCR"}].
//
// Upstream allows null option texts and ignores the letters they belong
// to (data sets exported through Arrow pad every object with all the
// letters of the data set, most of them null). Decoding JSON into an
// OptionList therefore drops null values: a letter is an option only
// where some object gives it a text. Within one object, keys are visited
// in sorted order (Go maps keep no order); this matters only when one
// object holds two options whose texts are the same.
type OptionList []map[string]string

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
	out := make(OptionList, len(raw))
	for i, entry := range raw {
		if entry == nil {
			return fmt.Errorf("mcqa: options[%d] is null, not an object", i)
		}
		m := make(map[string]string, len(entry))
		for k, v := range entry {
			if v != nil {
				m[k] = *v
			}
		}
		out[i] = m
	}
	*o = out
	return nil
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
// The error is non-nil only where upstream fails the request rather than
// scoring it: see ErrInvalidGradingMode, ErrInvalidOutputRegex and
// ErrUnsupportedPattern.
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
		pred, err = customRegexes(text, spec, allowed, task.Options)
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
			pred = answerColonMarkdown(text, allowed)
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
		for k := range entry {
			if r := []rune(k); len(r) == 1 && pyIsAlpha(r[0]) {
				letters[pyUpper(k)] = true
			}
		}
	}
	return letters
}

// sortedKeys returns the keys of one options object in a fixed order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
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
	choiceLetter          = mustPyCompile(`(?<![A-Za-z])([A-Za-z])(?![A-Za-z])`, 0)
	leadingChoiceLetter   = mustPyCompile(`^([a-zA-Z])(?![a-zA-Z0-9])`, 0)
	lastStandaloneLetter  = mustPyCompile(`\b[A-Z]\b(?!.*\b[A-Z]\b)`, pyDotAll)
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
	return strings.Join(pySplit(pyLower(s)), " ")
}

// normalizeExtracted turns a few non-Latin option letters into Latin ones
// and strips whitespace.
func normalizeExtracted(s string) string {
	return pystr.Strip(extractedAnswerFolder.Replace(s))
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
		for _, k := range sortedKeys(entry) {
			if pyLen(k) == 1 && allowed[pyUpper(k)] {
				opts = append(opts, option{pyUpper(k), normalizeForMatch(entry[k])})
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
		for _, k := range sortedKeys(entry) {
			if up := pyUpper(k); allowed[up] && normalizeForMatch(entry[k]) == norm {
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

// answerColonMarkdown tries the "Answer:" payloads from the last one
// back, and returns the first single choice letter found.
func answerColonMarkdown(text string, allowed map[string]bool) *string {
	ms := answerColonPayload.FindAllStringSubmatch(text, -1)
	for i := len(ms) - 1; i >= 0; i-- {
		if letter := choiceFromPayload(ms[i][1], allowed); letter != nil {
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
	} else if m, _ := leadingChoiceLetter.search(runes); m != nil {
		letter = m.GroupByNumber(1).String()
	} else if m, _ := lastStandaloneLetter.search(runes); m != nil {
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
	_ = choiceLetter.findAll(text, func(m *regexp2.Match) bool {
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
// list of them tried in order until one yields an answer.
func customRegexes(text string, spec any, allowed map[string]bool, options OptionList) (*string, error) {
	var patterns []any
	switch v := spec.(type) {
	case string:
		return customRegex(text, v, allowed, options)
	case []any:
		patterns = v
	case map[string]any:
		// Python iterates a dict's keys (in insertion order, which a Go
		// map does not keep: sorted order here).
		for _, k := range slices.Sorted(maps.Keys(v)) {
			patterns = append(patterns, k)
		}
	default:
		return nil, fmt.Errorf("%w: output_regex is %s, not a string or a list", ErrInvalidOutputRegex, jsonKind(spec))
	}
	for i, p := range patterns {
		s, ok := p.(string)
		if !ok {
			return nil, fmt.Errorf("%w: output_regex[%d] is %s, not a string", ErrInvalidOutputRegex, i, jsonKind(p))
		}
		pred, err := customRegex(text, s, allowed, options)
		if err != nil || pred != nil {
			return pred, err
		}
	}
	return nil, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// customRegex applies one output_regex pattern, case-insensitively: the
// last of its matches (its group 1 when it has one) is the answer, when
// it is a single letter (options or not) or the text of an option.
func customRegex(text, pattern string, allowed map[string]bool, options OptionList) (*string, error) {
	re, err := pyCompileCached(pattern, pyIgnoreCase)
	if err != nil {
		var pe *pyPatternError
		var raised *pyRaisedError
		switch {
		case errors.As(err, &pe):
			return nil, nil // upstream catches re.error
		case errors.As(err, &raised):
			return nil, fmt.Errorf("%w: %q: %v", ErrInvalidOutputRegex, pattern, err)
		}
		return nil, err
	}
	var last *regexp2.Match
	if err := re.findAll([]rune(text), func(m *regexp2.Match) bool {
		last = m
		return true
	}); err != nil {
		return nil, fmt.Errorf("mcqa: output_regex %q: %w", pattern, err)
	}
	if last == nil {
		return nil, nil
	}
	var s string
	switch re.groups {
	case 0:
		s = last.String()
	case 1:
		s = last.GroupByNumber(1).String()
	default:
		return nil, fmt.Errorf("%w: %q has %d groups, so its matches are tuples", ErrInvalidOutputRegex, pattern, re.groups)
	}
	captured := pyUpper(normalizeExtracted(pystr.Strip(s)))
	if r := []rune(captured); len(r) == 1 && pyIsAlpha(r[0]) {
		return ptr(captured), nil
	}
	return optionWithText(options, allowed, normalizeForMatch(captured)), nil
}
