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
//   - lenient_answer_colon_md NFKC-normalises the answer and reads every
//     "Answer:" payload (Markdown emphasis allowed around the word and
//     the colon; to the end of the line) and, when template_metadata has
//     a non-empty answer_prefix, every payload after that prefix (any
//     case, NFKC-normalised, whitespace after it skipped; to the next
//     newline). From the last payload back it takes the payload's single
//     character, its leading letter, or its last standalone capital, as
//     long as the payload does not list two different options ("A or
//     B"). With an answer_prefix and no letter found, the
//     strict_single_letter_boxed rule is tried last. Only the server
//     configuration can select this mode; a task naming it is refused,
//     as upstream refuses it.
//
// The server configuration's grading_mode, when set, overrides the
// task's. The reward is 1 when the letter read equals the expected answer
// (trimmed and upper-cased), else 0; a task without an expected answer
// never earns a reward.
//
// # Where gymlens differs
//
// Upstream's verifier raises, and its server answers 500, on some bodies
// its request model accepts. A crash is not a verdict, so this package
// scores those bodies instead:
//
//   - an output item of type "message" whose content is a non-empty
//     string, or a list of input parts (input_text, ...): upstream's
//     output_text iterates it and fails (AttributeError). Here such
//     content adds nothing to the answer text, as every part that is
//     not output_text adds nothing;
//   - lenient_answer_colon when some option object gives a letter that is
//     an option a null text (data sets exported through Arrow pad every
//     object with all letters): upstream fails comparing the null text
//     (AttributeError). Here null texts are no options, as in the other
//     modes;
//   - a template_metadata.output_regex that is null, a number, a boolean,
//     or a list holding something other than a string (TypeError), a
//     pattern with two or more groups that matches (its matches are
//     tuples: AttributeError), a pattern whose compilation raises
//     something other than re.error (OverflowError for a repetition count
//     of 2**32-1 or more, ValueError for (?a) with (?u)): here such a
//     pattern yields no answer, like an invalid one, and the next
//     pattern, or the grading mode, decides;
//   - an answer_prefix that is not a string (TypeError): here it is
//     ignored.
//
// TestUpstreamMCQAAgreement compares this package with upstream's code on
// thousands of generated bodies and counts the ones it leaves out for
// these reasons by exception type.
//
// Unicode data (case mappings, NFKC, character names) is Go's, version
// 15.0, where Python 3.13 has 15.1; the two differ only on the
// ideographs 15.1 added.
//
// # Python semantics
//
// The rules above are written in Python, and their edge cases follow
// Python's string and regular expression behaviour, which this package
// reproduces: str.strip/split whitespace, str.upper and str.lower with
// Unicode's special casing, and the re module. Regular expressions from
// the data set, and the upstream expressions that need lookaround, run on
// github.com/dlclark/regexp2 after being parsed with Python's grammar and
// rewritten where Python and .NET differ (package
// servers/resources/internal/pyre); the others run on Go's regexp with
// Python's character classes spelled out.
package mcqa
