// Package resources is the folder of the fleet's built-in environments,
// the NeMo Gym resources servers gymlens runs itself. Each is a package
// of its own, built on the environment SDK (package environment), with
// one row in servers/registry:
//
//   - arithmetic: the offline default; reads the last number of the
//     answer and compares it with expected_answer;
//   - stringmatch: string_match, upstream's extraction and grading of an
//     answer against expected_answer;
//   - mcqa: upstream's multiple-choice grading of an option letter;
//   - equivalence: equivalence_rule, exact match or string similarity;
//   - counter: a counter per session, with two tools.
//
// Under internal are the libraries they share: pystr (Python's str
// semantics) and pyre (Python's regular expressions on regexp2).
//
// This package holds no code; its test checks that each environment
// scores the dataset rows its package writes.
package resources
