// Package upstream finds the released NeMo Gym that scripts/upstream.sh
// installs, for the tests that run upstream's own code beside gymlens's:
// differential tests against its pydantic models, verifiers and
// aggregation, and fleets that mix its processes with ours.
//
// A test calls Python (or Run) first. Where upstream is not installed the
// test is skipped with one line naming scripts/upstream.sh, except under
// CI=true, where a missing upstream fails the test: CI installs it.
package upstream
