// Package dataset holds the rows a collection run feeds to agents: NeMo
// Gym's task JSONL format, and built-in offline datasets for the fleet's
// environments that need no download.
//
// A task file has one dataset row (a protocol.RunRequest) per line:
//
//	{"responses_create_params":{"input":[{"role":"user","content":"What is 87 + 53?"}]},
//	 "agent_ref":{"type":"responses_api_agents","name":"simple_agent"},"expected_answer":"140"}
//
// responses_create_params is required and must satisfy upstream's schema;
// agent_ref picks the agent that runs the row; every other member is a
// task field that travels to the environment untouched. ReadRows checks
// every row before returning any, so a bad row is reported before a run
// starts, by its 1-based line number.
//
// The generators (Arithmetic, StringMatch, MCQA, Equivalence, Counter)
// are seeded and reproducible on every platform. This package draws the
// questions; each row's wording, task fields and tools are the
// environment's own (the Row function of its package under
// servers/resources), and this package adds the agent_ref. The rows are
// written so that the fleet's built-in offline policy scores them
// deterministically:
// the arithmetic ones ask "What is A op B?" in the wording the policy
// recognises, the counter one spells out its "add N" steps. A row's
// identity for resuming a run is its place in the dataset (the collector
// numbers distinct rows 0, 1, 2, ... as _ng_task_index), so the same
// generator call gives the same identities every time.
package dataset
