// Package mcqa scores answers to multiple-choice questions the way NeMo
// Gym's "mcqa" resources server does. It is the grading logic only: no
// HTTP, no telemetry, no state; a server wraps Score.
//
// # Input
//
// A task (Task) carries its options, a list of {"letter": "text"}
// objects, and the letter of the right one. The answer is the model's
// output text, built from a Responses API response exactly as
// openai-python's Response.output_text property builds it: for each
// output item of type "message", the text of each of its content parts
// of type "output_text", all concatenated in order with nothing in
// between. Other item kinds (reasoning, tool calls) and refusal parts add
// nothing. An answer that is empty after trimming whitespace earns 0 and
// has no extracted letter.
//
// # Reading the letter
//
// When the task's template_metadata has an "output_regex", that Python
// regular expression (or each of a list of them, until one yields an
// answer) is matched case-insensitively against the whole answer; the
// last match counts (its first group when it has one). A single letter
// there is taken as the answer even if it is not an option; otherwise the
// matched text is compared with the option texts. When this gives nothing
// the grading mode decides:
//
//   - strict_single_letter_boxed (the default) looks only at the last
//     \boxed{...}. After removing \text{...} wrappers, the content must be
//     one upper-case letter with no other ASCII letter anywhere in it
//     ("C", "(C)", "[C]"), or begin with an upper-case letter followed by
//     one of : ) . - ("C: some text", "C) ..."). Lower-case letters and
//     letters that are not options give no answer.
//   - lenient_boxed first does the same, then accepts the option whose
//     text (case and spacing ignored) appears inside the last \boxed{...},
//     provided exactly one option's text does.
//   - lenient_answer_colon reads the rest of the line after the first
//     "answer:" (any case): one option letter, in either case, or the
//     exact text of an option.
//   - lenient_answer_colon_md reads every "Answer:" payload, Markdown
//     emphasis allowed around the word and the colon, from the last one
//     back: the payload's single character, its leading letter, or its
//     last standalone capital, as long as the payload does not list two
//     different options ("A or B"). Only the server configuration can
//     select this mode; a task naming it is refused, as upstream refuses
//     it.
//
// The server configuration's grading_mode, when set, overrides the
// task's. The reward is 1 when the letter read equals the expected answer
// (trimmed and upper-cased), else 0; a task without an expected answer
// never earns a reward.
//
// # Python semantics
//
// The rules above are written in Python, and their edge cases follow
// Python's string and regular expression behaviour, which this package
// reproduces: str.strip/split whitespace, str.upper and str.lower with
// Unicode's special casing, and the re module. Regular expressions from
// the data set, and the upstream expressions that need lookaround, run on
// github.com/dlclark/regexp2 after being parsed with Python's grammar and
// rewritten where Python and .NET differ (see pyre.go); the others run on
// Go's regexp with Python's character classes spelled out.
package mcqa
