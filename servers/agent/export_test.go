package agent

// Internal helpers under test.
var (
	Endpoint        = endpoint
	JoinRoot        = joinRoot
	RolloutEndpoint = rolloutEndpoint
)
