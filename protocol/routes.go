package protocol

// Paths of NeMo Gym's server routes.
const (
	// PathLiveness answers GET with {"status":"ok"} on every server.
	PathLiveness = "/"
	// PathRun is the agent's rollout endpoint.
	PathRun = "/run"
	// PathResponses is the Responses API endpoint of models and agents.
	PathResponses = "/v1/responses"
	// PathChatCompletions is the Chat Completions endpoint of models.
	PathChatCompletions = "/v1/chat/completions"
	// PathSeedSession starts a rollout's session on a resources server.
	PathSeedSession = "/seed_session"
	// PathVerify scores an episode on a resources server.
	PathVerify = "/verify"
	// PathAggregateMetrics aggregates verify results.
	PathAggregateMetrics = "/aggregate_metrics"
	// PathReverifyMode tells whether a resources server can verify again.
	PathReverifyMode = "/reverify_mode"
	// RolloutPrefix starts a path that carries a rollout id:
	// /ng-rollout/<id>/<rest>.
	RolloutPrefix = "/ng-rollout/"
)

// Values of GET /reverify_mode.
const (
	ReverifyStateless   = "stateless"
	ReverifyUnsupported = "unsupported"
	ReverifyUnknown     = "unknown"
)

// LivenessBody is the body of GET / on every server.
const LivenessBody = `{"status":"ok"}`
