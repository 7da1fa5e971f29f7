// Package equivalence scores a model's answer against a task's expected
// answer by string similarity, as NeMo Gym's "equivalence_rule" resources
// server does. It is the scoring core only: no HTTP, no telemetry, no I/O,
// so a server, a CLI or a test can call it directly.
//
// # Building the answer
//
// The answer is every output_text part of every message item of the
// model's response, in response order, concatenated with nothing in
// between (no space, no newline). Refusal parts, reasoning items, function
// calls and any other item or part type contribute nothing. Score takes
// the part texts and does the joining itself; JoinTexts and ScoreText are
// there for callers that hold the texts differently.
//
// Upstream's verifier raises AttributeError, and its server answers
// 500, when an output item of type "message" has content that is a
// non-empty string or holds input parts (input_text, ...), which its
// request model accepts: it asks every element of the content for its
// type. A crash is not a verdict, so this package scores such a body,
// the string or the input parts adding nothing to the answer, as every
// part that is not output_text adds nothing. TestUpstreamEquivalenceRuleAgreement
// compares this package with upstream's code on thousands of generated
// bodies and counts the ones it leaves out for that reason.
//
// # Normalisation
//
// Before any comparison both the answer and the task's expected_answer go
// through Normalize, which reproduces Python's
//
//	strip, then lower, then replace each run of whitespace with one space
//
// on Unicode code points: "whitespace" is Python's str.isspace set (the
// Unicode White_Space characters plus the four ASCII separators U+001C to
// U+001F), and lowercasing is Python's str.lower, including its two
// departures from per-character simple mapping: U+0130 (capital I with
// dot above) becomes "i" followed by U+0307, and a capital sigma that ends
// a word becomes the final form U+03C2.
//
// # Grading rules
//
// The server configuration picks one rule for every task:
//
//   - exact (the default): reward 1 when the two normalised strings are
//     identical, else 0.
//   - seq_match: Ratio(answer, expected), the similarity of Python's
//     difflib.SequenceMatcher with no junk predicate and autojunk on.
//   - weighted_seq_match: 0.85 times that ratio plus 0.15 times the ratio
//     of the prefixes, where the expected prefix is the first ten code
//     points of the normalised expected answer and the answer prefix is
//     the answer's first code points, as many as the expected prefix has.
//     The sum is clamped to [0, 1].
//
// The reward is also reported under the response key "equivalence_score"
// (Result.Fields).
//
// # The similarity ratio
//
// Ratio is a re-implementation of SequenceMatcher.ratio that gives the
// same float64, bit for bit, as CPython for the same two strings. Strings
// are compared as sequences of code points (not bytes, not UTF-16 units).
// The matching blocks are found the way difflib finds them: take the
// longest common run (the earliest one in the first string when several
// tie, then the earliest in the second), and recurse on what lies left and
// right of it. The ratio is twice the number of matched code points over
// the total length of both strings, or 1 when both are empty.
//
// The "autojunk" rule of difflib is part of the result and is reproduced:
// when the second string has 200 or more code points, any code point that
// occurs in it more than len/100+1 times (integer division) is not used to
// seed a match, although it can still be absorbed when a seeded match is
// grown at its ends. The ratio is therefore not symmetric in general, and
// for long natural-language strings it is typically well below what a
// plain longest-common-subsequence measure would give.
package equivalence
