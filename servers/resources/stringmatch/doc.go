// Package stringmatch scores free-form text answers the way NeMo Gym's
// string_match resources server does, without any server, transport or
// telemetry around it: a caller hands Score the assistant's text and the
// task row, and gets back the reward and the answer that was graded.
//
// Scoring has two steps.
//
// Extraction picks the candidate answer out of the assistant text, as the
// task's extraction_mode says:
//
//   - "boxed": the content of the last \boxed{...} whose braces balance,
//     trimmed, with any number of whole-value \text{...} wrappers peeled
//     off;
//   - "final_answer" (the default): what follows the last "Final answer:"
//     or "Answer:" label (any case, even inside a longer word; an ASCII or
//     a full-width colon) up to the end of its line, or of the next line
//     that is not blank when nothing follows the label on its own line;
//     trimmed and without trailing full stops. A label inside the value of
//     an earlier one is part of that value. When the text has no label
//     with something after it, the "boxed" rule is used instead;
//   - "last_line": the last line that is not blank, trimmed;
//   - "full_response": the whole text, trimmed.
//
// A text in which the mode finds nothing yields no answer (Result's
// ExtractedAnswer is nil) and reward 0; a label followed by just a full
// stop yields the empty answer, which is graded like any other.
//
// Grading compares the answer with expected_answer. With case_sensitive
// set it is plain equality of the two trimmed strings. Otherwise both are
// NFKC-normalised, lose one pair of surrounding quotes, are lowercased and
// lose trailing '.', '!' and '?', and then the first of these checks that
// holds decides the reward: plain equality, equality as floating-point
// numbers, equality with thousands separators removed, equality with
// LaTeX formatting commands and math delimiters removed, equality as
// lists (separators and the words "and"/"or" ignored), equality with US
// state names replaced by their postal codes, and equality with common
// units removed. Each of these scores 1, except that two numbers within
// about one percent of each other (after currency, percent and unit
// signs are dropped) score 0.98; anything else scores 0.
//
// String handling follows Python's rules rather than Go's where they
// differ, so that scores agree with the upstream server: whitespace is
// Python's Unicode whitespace, lowercasing is Python's full lowercasing
// (final sigma included), number parsing is that of Python's float(), and
// lengths are counted in code points. TestUpstreamStringMatchAgreement holds this
// package to upstream's code: thousands of generated bodies, scored by
// both, must get the same reward and extracted answer.
package stringmatch
