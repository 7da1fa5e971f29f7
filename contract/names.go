package contract

// Instrumentation scopes. NeMo Gym records its gym.* metrics through
// nemo-lens's meter and starts its own spans from the tracer "nemo.gym";
// gymlens names its meter and tracer alike, so a query on the scope finds
// the Go and the Python processes of one fleet together.
const (
	// MeterScope is the scope of every instrument a gymlens process
	// records (gym.*, gen_ai.*, http.*).
	MeterScope = "nemo.lens"
	// TracerScope is the scope of every span a gymlens process starts.
	TracerScope = "nemo.gym"
)

// Server types, as NeMo Gym's config dict names them (the key between a
// server instance and its implementation), plus the orchestrator's role.
// This is the one list of them: the config layer, the registry, the
// launcher and telemetry all read it from here.
const (
	ServerTypeResources = "resources_servers"
	ServerTypeAgent     = "responses_api_agents"
	ServerTypeModel     = "responses_api_models"
	// ServerTypeEnvironment is nemo-gym 0.7's fourth type: a server that
	// runs episodes for the collector (POST /run, /aggregate_metrics),
	// usually a legacy_agent relay in front of one agent.
	ServerTypeEnvironment  = "environment_servers"
	ServerTypeOrchestrator = "orchestrator"
)

// ServerTypes returns NeMo Gym's four server types, in the order a fleet
// starts them: verifiers and models first, then the agents that call them,
// then the environment servers in front of the agents.
func ServerTypes() []string {
	return []string{ServerTypeResources, ServerTypeModel, ServerTypeAgent, ServerTypeEnvironment}
}

// IsServerType reports whether s is one of ServerTypes.
func IsServerType(s string) bool {
	switch s {
	case ServerTypeResources, ServerTypeModel, ServerTypeAgent, ServerTypeEnvironment:
		return true
	}
	return false
}

// IsRole reports whether s is a process role telemetry accepts: a server
// type, the orchestrator, or "" (a process outside any fleet).
func IsRole(s string) bool { return s == "" || s == ServerTypeOrchestrator || IsServerType(s) }

// Resource attribute keys a gymlens process puts on every signal.
const (
	AttrServiceGroup = "nemo.gym.service_group"
	AttrServerName   = "nemo.gym.server.name"
	AttrServerType   = "nemo.gym.server.type"
	AttrVersion      = "nemo.gym.version"
	AttrRunID        = "nemo.run.id"
	// AttrDLRank and AttrDLWorldSize are nemo-lens's rank resource keys.
	AttrDLRank      = "dl.rank"
	AttrDLWorldSize = "dl.world_size"
)

// Gym attribute keys of spans and metric points.
const (
	// AttrRolloutID is the rollout id (upstream's _ng_rollout_id, else
	// "<task>-<rollout>", "-a<n>" on a re-dispatch) on every span of a
	// rollout, in every process.
	AttrRolloutID = "nemo.gym.rollout.id"
	// AttrTaskID is a task's id, when the dataset row carries one.
	AttrTaskID = "nemo.gym.task.id"
	// AttrRolloutRepeat and AttrRolloutAttempt complete a rollout's
	// identity next to AttrTaskID (its task index): the row's repeat
	// (upstream's _ng_rollout_index) and attempt (_ng_attempt_index, 0 for
	// the first call), as integers. NeMo Gym 0.7.0 names neither.
	AttrRolloutRepeat  = "nemo.gym.rollout.repeat"
	AttrRolloutAttempt = "nemo.gym.rollout.attempt"
	// AttrJobTasks is the number of tasks on the gym.job span.
	AttrJobTasks = "nemo.gym.job.tasks"
	// AttrVerifyReward is the reward on the gym.verify span.
	AttrVerifyReward = "nemo.gym.verify.reward"
	// AttrModelMode says how the built-in model server answered
	// (ModeBuiltin or ModeUpstream).
	AttrModelMode = "nemo.gym.model.mode"

	AttrVerifyOutcome   = "nemo.gym.verify.outcome"
	AttrRolloutOutcome  = "nemo.gym.rollout.outcome"
	AttrConcurrencySite = "nemo.gym.concurrency.site"
	AttrModelDialect    = "nemo.gym.model.dialect"
	AttrHTTPInternal    = "nemo.gym.http.internal"
	AttrHTTPRetryReason = "nemo.gym.http.retry_reason"
	AttrAgentName       = "nemo.gym.agent.name"
	AttrToolName        = "nemo.gym.tool.name"
)

// Values of AttrVerifyOutcome and AttrRolloutOutcome.
const (
	OutcomeSuccess = "success"
	OutcomeFailure = "failure"
)

// Values of AttrHTTPRetryReason, as upstream's egress client classifies a
// failed attempt it retries.
const (
	RetryServerDisconnected = "server_disconnected"
	RetryClientOSError      = "client_os_error"
	RetryTimeout            = "timeout"
	RetryOther              = "other"
)

// Values of AttrModelDialect: the API a model call spoke.
const (
	DialectResponses       = "responses"
	DialectChatCompletions = "chat_completions"
)

// Values of AttrConcurrencySite gymlens records.
const (
	// SiteRolloutCollection is the collection driver's limit on rollouts
	// in flight (num_samples_in_parallel, gymlens rollouts collect
	// --concurrency).
	SiteRolloutCollection = "rollout_collection"
)

// Values of AttrModelMode.
const (
	ModeBuiltin  = "builtin"
	ModeUpstream = "upstream"
)

// EventRetry is the span event a CLIENT span gets for each attempt its
// call sends again.
const EventRetry = "retry"

// OpenTelemetry semantic-convention attribute keys gymlens sets.
const (
	AttrHTTPRoute          = "http.route"
	AttrHTTPRequestMethod  = "http.request.method"
	AttrHTTPResponseStatus = "http.response.status_code"
	AttrURLScheme          = "url.scheme"
	AttrURLFull            = "url.full"
	AttrErrorType          = "error.type"
	AttrServerAddress      = "server.address"
	AttrServerPort         = "server.port"
	// AttrHTTPRequestResendCount is how many times a call was sent again
	// (its retries), on the CLIENT span and on each retry event.
	AttrHTTPRequestResendCount = "http.request.resend_count"
	// AttrNetworkProtocolVersion is the HTTP version of a request ("1.1",
	// "2"), which the HTTP server duration carries in the new conventions.
	AttrNetworkProtocolVersion = "network.protocol.version"

	// The semantic conventions before HTTP went stable, which Python's
	// FastAPI instrumentation still emits unless
	// OTEL_SEMCONV_STABILITY_OPT_IN says otherwise.
	AttrOldHTTPMethod     = "http.method"
	AttrOldHTTPStatusCode = "http.status_code"
	AttrOldHTTPScheme     = "http.scheme"
	AttrOldHTTPFlavor     = "http.flavor"
	AttrOldHTTPTarget     = "http.target"
	AttrOldHTTPHost       = "http.host"
	AttrOldHTTPServerName = "http.server_name"
	AttrOldNetHostPort    = "net.host.port"

	AttrGenAIOperationName = "gen_ai.operation.name"
	AttrGenAIProviderName  = "gen_ai.provider.name"
	AttrGenAIRequestModel  = "gen_ai.request.model"
	AttrGenAIResponseModel = "gen_ai.response.model"
	AttrGenAIResponseID    = "gen_ai.response.id"
	AttrGenAIFinishReasons = "gen_ai.response.finish_reasons"
	AttrGenAIInputTokens   = "gen_ai.usage.input_tokens"
	AttrGenAIOutputTokens  = "gen_ai.usage.output_tokens"
	AttrGenAITokenType     = "gen_ai.token.type"
	GenAIOperationChat     = "chat"
	GenAITokenTypeInput    = "input"
	GenAITokenTypeOutput   = "output"
)

// Span names.
const (
	SpanJob                  = "gym.job"
	SpanRollout              = "gym.rollout"
	SpanVerify               = "gym.verify"
	SpanAgentResponses       = "gym.agent.responses"
	SpanModelResponses       = "gym.model.responses"
	SpanModelChatCompletions = "gym.model.chat_completions"
)

// ClientSpanName is the name of the CLIENT span of one outgoing call, as
// upstream's egress client names it: "HTTP " and the method, upper case
// ("HTTP POST"). The route is in url.full, not in the name.
func ClientSpanName(method string) string {
	switch method {
	case "POST":
		return "HTTP POST"
	case "GET":
		return "HTTP GET"
	}
	return "HTTP " + upper(method)
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// OpenTelemetry resource attribute keys gymlens reads back (gymlens report).
const (
	AttrServiceName       = "service.name"
	AttrServiceInstanceID = "service.instance.id"
	AttrProcessPID        = "process.pid"
)

// Version is the gymlens release, reported as service.version and
// nemo.gym.version on every signal's resource.
const Version = "0.1.0"

// Resource attribute keys nemo-lens detects that the OpenTelemetry semantic
// conventions do not define (or define under another name now); the
// standard ones (host.name, process.pid, k8s.*) come from the semconv
// package.
const (
	// AttrDeploymentEnvironment is nemo-lens's deployment.environment,
	// from DEPLOYMENT_ENV, else ENVIRONMENT (semconv has since renamed it
	// deployment.environment.name).
	AttrDeploymentEnvironment = "deployment.environment"
	// AttrHostGPUCount is the number of GPUs CUDA_VISIBLE_DEVICES lists.
	AttrHostGPUCount = "host.gpu.count"

	AttrSlurmJobID       = "slurm.job.id"
	AttrSlurmJobName     = "slurm.job.name"
	AttrSlurmNodeList    = "slurm.nodelist"
	AttrSlurmNNodes      = "slurm.nnodes"
	AttrSlurmNTasks      = "slurm.ntasks"
	AttrSlurmPartition   = "slurm.partition"
	AttrSlurmClusterName = "slurm.cluster.name"
)

// Other is the attribute value a recorder puts in place of a value past
// its cardinality cap (64 distinct values per recorder), as the
// OpenTelemetry SDK's own overflow series does.
const Other = "_OTHER"

// Values of AttrGenAIProviderName on model calls. Every model call of a
// fleet speaks an OpenAI API (Responses or Chat Completions): the agent's
// calls to a model server, and a model server's forwarded calls to an
// OpenAI-compatible endpoint, are GenAIProviderOpenAI. The built-in model
// server's deterministic policy answers itself: GenAIProviderGymlens.
const (
	GenAIProviderOpenAI  = "openai"
	GenAIProviderGymlens = "gymlens"
)

// Values of AttrGenAIFinishReasons gymlens maps a Responses API answer to
// (a chat completion's finish_reason is passed on as it is).
const (
	FinishReasonStop          = "stop"
	FinishReasonLength        = "length"
	FinishReasonContentFilter = "content_filter"
	FinishReasonToolCalls     = "tool_calls"
	FinishReasonError         = "error"
)

// ResponseFinishReason maps a Responses API answer (its status, the
// incomplete_details reason, and whether it asks for function calls) to
// the finish reason the GenAI conventions name, as a chat completion's
// finish_reason would read: completed is "stop", or "tool_calls" when the
// answer calls a function; incomplete for max_output_tokens is "length",
// for content_filter "content_filter"; failed is "error"; any other
// status is passed on as it is.
func ResponseFinishReason(status, incompleteReason string, functionCalls bool) string {
	switch status {
	case "completed":
		if functionCalls {
			return FinishReasonToolCalls
		}
		return FinishReasonStop
	case "incomplete":
		switch incompleteReason {
		case "max_output_tokens":
			return FinishReasonLength
		case "content_filter":
			return FinishReasonContentFilter
		}
		if incompleteReason != "" {
			return incompleteReason
		}
		return FinishReasonLength
	case "failed":
		return FinishReasonError
	}
	return status
}

// SessionCookieName is the name of the session cookie a server sets: its
// class (for gymlens's servers, the implementation's name) and its
// instance name in the fleet, joined by three underscores, as NeMo Gym's
// servers name theirs.
func SessionCookieName(class, instance string) string { return class + "___" + instance }
