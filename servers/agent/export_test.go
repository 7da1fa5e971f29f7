package agent

// Internal helpers under test.
var (
	Endpoint         = endpoint
	JoinRoot         = joinRoot
	RolloutEndpoint  = rolloutEndpoint
	UpstreamAnswer   = upstreamAnswer
	PythonJSONError  = pythonJSONError
	InvalidArguments = invalidArguments
)
