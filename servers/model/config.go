package model

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/lens"
)

// Defaults of the configuration keys.
const (
	DefaultModel              = "gym-policy"
	DefaultCorrectProbability = 0.8
	DefaultAPIKeyEnv          = "OPENAI_API_KEY"
	DefaultUpstreamTimeoutMS  = 60000
	DefaultUpstreamAPI        = APIChatCompletions
)

// Values of UpstreamConfig.API: which OpenAI-compatible API a request to
// POST /v1/responses is forwarded to.
const (
	// APIChatCompletions translates the request to POST
	// <base>/v1/chat/completions and the first choice back.
	APIChatCompletions = "chat_completions"
	// APIResponses posts the request to <base>/v1/responses as it came
	// (model replaced) and checks the answer against the schema.
	APIResponses = "responses"
)

// Config configures the policy model server.
//
// Start from Defaults(): CorrectProbability is taken as given, so a Config
// literal that leaves it out gets 0, a policy that is always wrong. Decoding
// a Config from JSON or YAML starts from Defaults() (not from the value
// being decoded into), so keys a file leaves out keep their defaults.
//
// Forwarding is configured either with the Upstream block or with the
// three flat keys of NeMo Gym's openai_model server (openai_base_url,
// openai_api_key, openai_model), which mean an Upstream block with API
// "responses", as that server forwards. Setting both is an error.
type Config struct {
	// Name is the server's instance name, reported on spans as
	// nemo.gym.server.name; "" means ServerName.
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
	// Model is the model name the built-in policy reports; "" means
	// DefaultModel.
	Model string `json:"model,omitempty" yaml:"model,omitempty"`
	// Seed seeds the built-in policy together with the question text.
	Seed int64 `json:"seed" yaml:"seed"`
	// CorrectProbability is the chance, in [0, 1], that the built-in
	// policy answers an arithmetic question correctly.
	CorrectProbability float64 `json:"correct_probability" yaml:"correct_probability"`
	// LatencyMS is a simulated think time added to every built-in answer,
	// cut short when the caller goes away. 0 means none.
	LatencyMS float64 `json:"latency_ms,omitempty" yaml:"latency_ms,omitempty"`
	// StallTasks lists task indices (a row's _ng_task_index) whose
	// rollouts stall: the first model call of such a rollout's episode
	// waits StallSeconds before it is answered (see the package
	// documentation for how a call's task is known). Each must be an
	// integer >= 0.
	StallTasks []int `json:"stall_tasks,omitempty" yaml:"stall_tasks,omitempty"`
	// StallSeconds is how long a stalled call waits, cut short when the
	// caller goes away; 0 means no stall.
	StallSeconds float64 `json:"stall_seconds,omitempty" yaml:"stall_seconds,omitempty"`
	// Upstream, when its BaseURL is set, replaces the built-in policy by
	// an OpenAI-compatible endpoint.
	Upstream UpstreamConfig `json:"upstream,omitzero" yaml:"upstream,omitempty"`

	// OpenAIBaseURL, OpenAIAPIKey and OpenAIModel are upstream's
	// openai_model keys: the same as Upstream.BaseURL, Upstream.APIKey
	// and Upstream.Model with Upstream.API "responses".
	OpenAIBaseURL string `json:"openai_base_url,omitempty" yaml:"openai_base_url,omitempty"`
	OpenAIAPIKey  string `json:"openai_api_key,omitempty" yaml:"openai_api_key,omitempty"`
	OpenAIModel   string `json:"openai_model,omitempty" yaml:"openai_model,omitempty"`
}

// UpstreamConfig points the server at an OpenAI-compatible endpoint. Its
// String and LogValue methods never show the API key.
type UpstreamConfig struct {
	// BaseURL is the endpoint's base, such as "https://api.openai.com" or
	// "http://127.0.0.1:8000"; requests go to <BaseURL>/v1/responses or
	// <BaseURL>/v1/chat/completions (a BaseURL that already ends in /v1
	// is not given a second one).
	BaseURL string `json:"base_url,omitempty" yaml:"base_url,omitempty"`
	// APIKey is sent as a bearer token. Leave it empty to read the key
	// from the environment variable named by APIKeyEnv instead.
	APIKey string `json:"api_key,omitempty" yaml:"api_key,omitempty"`
	// APIKeyEnv names the variable holding the key when APIKey is empty;
	// "" means DefaultAPIKeyEnv. An unset variable means no Authorization
	// header, which suits local servers.
	APIKeyEnv string `json:"api_key_env,omitempty" yaml:"api_key_env,omitempty"`
	// Model is the upstream model name; required with BaseURL. It
	// replaces the model of every forwarded request.
	Model string `json:"model,omitempty" yaml:"model,omitempty"`
	// API is the upstream API that POST /v1/responses is forwarded to,
	// APIChatCompletions or APIResponses; "" means DefaultUpstreamAPI.
	// POST /v1/chat/completions always goes to the upstream's chat
	// completions.
	API string `json:"api,omitempty" yaml:"api,omitempty"`
	// TimeoutMS bounds one upstream call; 0 means
	// DefaultUpstreamTimeoutMS.
	TimeoutMS float64 `json:"timeout_ms,omitempty" yaml:"timeout_ms,omitempty"`
}

// Defaults returns the default configuration: the built-in policy, right
// 80% of the time, with no latency.
func Defaults() Config {
	return Config{
		Model:              DefaultModel,
		CorrectProbability: DefaultCorrectProbability,
		Upstream: UpstreamConfig{APIKeyEnv: DefaultAPIKeyEnv, API: DefaultUpstreamAPI,
			TimeoutMS: DefaultUpstreamTimeoutMS},
	}
}

// withDefaults fills the keys whose zero value means "default" and folds
// the openai_* keys into Upstream.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = ServerName
	}
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.OpenAIBaseURL != "" {
		c.Upstream.BaseURL, c.Upstream.APIKey, c.Upstream.Model = c.OpenAIBaseURL, c.OpenAIAPIKey, c.OpenAIModel
		c.Upstream.API = APIResponses
		c.OpenAIBaseURL, c.OpenAIAPIKey, c.OpenAIModel = "", "", ""
	}
	if c.Upstream.APIKeyEnv == "" {
		c.Upstream.APIKeyEnv = DefaultAPIKeyEnv
	}
	if c.Upstream.API == "" {
		c.Upstream.API = DefaultUpstreamAPI
	}
	if c.Upstream.TimeoutMS == 0 {
		c.Upstream.TimeoutMS = DefaultUpstreamTimeoutMS
	}
	return c
}

// Validate reports a configuration the server cannot run with.
func (c Config) Validate() error {
	if math.IsNaN(c.CorrectProbability) || c.CorrectProbability < 0 || c.CorrectProbability > 1 {
		return fmt.Errorf("model: correct_probability must be in [0, 1], got %v", c.CorrectProbability)
	}
	if !finiteNonNegative(c.LatencyMS) {
		return fmt.Errorf("model: latency_ms must be a finite number >= 0, got %v", c.LatencyMS)
	}
	if !finiteNonNegative(c.StallSeconds) || c.StallSeconds > maxStallSeconds {
		return fmt.Errorf("model: stall_seconds must be a number in [0, %d], got %v", int64(maxStallSeconds), c.StallSeconds)
	}
	for i, task := range c.StallTasks {
		if task < 0 {
			return fmt.Errorf("model: stall_tasks[%d] must be a task index >= 0, got %d", i, task)
		}
	}
	if c.OpenAIBaseURL != "" || c.OpenAIAPIKey != "" || c.OpenAIModel != "" {
		if c.Upstream.BaseURL != "" {
			return fmt.Errorf("model: set either upstream.base_url or openai_base_url, not both")
		}
		if c.OpenAIBaseURL == "" {
			return fmt.Errorf("model: openai_api_key and openai_model need openai_base_url")
		}
		if err := validateBase(c.OpenAIBaseURL, "openai_base_url"); err != nil {
			return err
		}
		if c.OpenAIModel == "" {
			return fmt.Errorf("model: openai_model is required when openai_base_url is set")
		}
	}
	return c.Upstream.validate()
}

func (u UpstreamConfig) validate() error {
	if !finiteNonNegative(u.TimeoutMS) {
		return fmt.Errorf("model: upstream.timeout_ms must be a finite number >= 0, got %v", u.TimeoutMS)
	}
	switch u.API {
	case "", APIChatCompletions, APIResponses:
	default:
		return fmt.Errorf("model: upstream.api must be %q or %q, got %q", APIChatCompletions, APIResponses, u.API)
	}
	if u.BaseURL == "" {
		return nil
	}
	if err := validateBase(u.BaseURL, "upstream.base_url"); err != nil {
		return err
	}
	if u.Model == "" {
		return fmt.Errorf("model: upstream.model is required when upstream.base_url is set")
	}
	return nil
}

// validateBase checks an upstream base URL. The URL itself stays out of
// the message: it may carry credentials.
func validateBase(raw, key string) error {
	p, err := url.Parse(raw)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("model: %s must be an absolute http or https URL", key)
	}
	return nil
}

func finiteNonNegative(f float64) bool { return f >= 0 && !math.IsInf(f, 0) }

// maxStallSeconds is the longest stall a time.Duration can hold.
const maxStallSeconds = float64(math.MaxInt64 / int64(time.Second))

// UnmarshalJSON decodes c, starting from Defaults().
func (c *Config) UnmarshalJSON(b []byte) error {
	type plain Config // no methods: no recursion
	p := plain(Defaults())
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*c = Config(p)
	return nil
}

// UnmarshalYAML decodes c, starting from Defaults().
func (c *Config) UnmarshalYAML(n *yaml.Node) error {
	type plain Config
	p := plain(Defaults())
	if err := n.Decode(&p); err != nil {
		return err
	}
	*c = Config(p)
	return nil
}

// String describes c with the API keys hidden.
func (c Config) String() string {
	return fmt.Sprintf("{Name:%s Model:%s Seed:%d CorrectProbability:%v LatencyMS:%v StallTasks:%v StallSeconds:%v Upstream:%s OpenAIBaseURL:%s OpenAIAPIKey:%s OpenAIModel:%s}",
		c.Name, c.Model, c.Seed, c.CorrectProbability, c.LatencyMS, c.StallTasks, c.StallSeconds, c.Upstream, safeBase(c.OpenAIBaseURL),
		hidden(c.OpenAIAPIKey), c.OpenAIModel)
}

// GoString is String, so %#v hides the API keys too.
func (c Config) GoString() string { return "model.Config" + c.String() }

// LogValue implements slog.LogValuer with the API keys hidden.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", c.Name),
		slog.String("model", c.Model),
		slog.Int64("seed", c.Seed),
		slog.Float64("correct_probability", c.CorrectProbability),
		slog.Float64("latency_ms", c.LatencyMS),
		slog.Any("stall_tasks", c.StallTasks),
		slog.Float64("stall_seconds", c.StallSeconds),
		slog.Any("upstream", c.Upstream),
		slog.String("openai_base_url", safeBase(c.OpenAIBaseURL)),
		slog.String("openai_api_key", hidden(c.OpenAIAPIKey)),
		slog.String("openai_model", c.OpenAIModel),
	)
}

// String describes u with the API key hidden.
func (u UpstreamConfig) String() string {
	return fmt.Sprintf("{BaseURL:%s APIKey:%s APIKeyEnv:%s Model:%s API:%s TimeoutMS:%v}",
		safeBase(u.BaseURL), hidden(u.APIKey), u.APIKeyEnv, u.Model, u.API, u.TimeoutMS)
}

// GoString is String, so %#v hides the API key too.
func (u UpstreamConfig) GoString() string { return "model.UpstreamConfig" + u.String() }

// LogValue implements slog.LogValuer with the API key hidden.
func (u UpstreamConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", safeBase(u.BaseURL)),
		slog.String("api_key", hidden(u.APIKey)),
		slog.String("api_key_env", u.APIKeyEnv),
		slog.String("model", u.Model),
		slog.String("api", u.API),
		slog.Float64("timeout_ms", u.TimeoutMS),
	)
}

func hidden(key string) string {
	if key == "" {
		return ""
	}
	return lens.Redacted
}

// safeBase is the base URL as it may be shown: without query string,
// fragment or user credentials.
func safeBase(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparsable URL]"
	}
	return lens.SafeURL(u)
}
