package model

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/url"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/lens"
)

// Defaults of the configuration keys.
const (
	DefaultModel              = "gym-policy"
	DefaultCorrectProbability = 0.8
	DefaultAPIKeyEnv          = "OPENAI_API_KEY"
	DefaultUpstreamTimeoutMS  = 60000
)

// Config configures the policy model server.
//
// Start from Defaults(): CorrectProbability is taken as given, so a Config
// literal that leaves it out gets 0, a policy that is always wrong. Decoding
// a Config from JSON or YAML starts from Defaults() (not from the value
// being decoded into), so keys a file leaves out keep their defaults.
type Config struct {
	// Model is the model name the server reports; "" means DefaultModel.
	Model string `json:"model,omitempty" yaml:"model,omitempty"`
	// Seed seeds the built-in policy together with the question text.
	Seed int64 `json:"seed" yaml:"seed"`
	// CorrectProbability is the chance, in [0, 1], that the built-in
	// policy answers a question it could parse correctly.
	CorrectProbability float64 `json:"correct_probability" yaml:"correct_probability"`
	// LatencyMS is a simulated think time added to every built-in answer,
	// cut short when the caller goes away. 0 means none.
	LatencyMS float64 `json:"latency_ms,omitempty" yaml:"latency_ms,omitempty"`
	// Upstream, when its BaseURL is set, replaces the built-in policy by
	// an OpenAI-compatible chat completions endpoint.
	Upstream UpstreamConfig `json:"upstream,omitzero" yaml:"upstream,omitempty"`
}

// UpstreamConfig points the server at an OpenAI-compatible endpoint. Its
// String and LogValue methods never show the API key.
type UpstreamConfig struct {
	// BaseURL is the endpoint's base, such as "https://api.openai.com" or
	// "http://127.0.0.1:8000"; requests go to <BaseURL>/v1/chat/completions
	// (a BaseURL that already ends in /v1 is not given a second one).
	BaseURL string `json:"base_url,omitempty" yaml:"base_url,omitempty"`
	// APIKey is sent as a bearer token. Leave it empty to read the key
	// from the environment variable named by APIKeyEnv instead.
	APIKey string `json:"api_key,omitempty" yaml:"api_key,omitempty"`
	// APIKeyEnv names the variable holding the key when APIKey is empty;
	// "" means DefaultAPIKeyEnv. An unset variable means no Authorization
	// header, which suits local servers.
	APIKeyEnv string `json:"api_key_env,omitempty" yaml:"api_key_env,omitempty"`
	// Model is the upstream model name; required with BaseURL.
	Model string `json:"model,omitempty" yaml:"model,omitempty"`
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
		Upstream:           UpstreamConfig{APIKeyEnv: DefaultAPIKeyEnv, TimeoutMS: DefaultUpstreamTimeoutMS},
	}
}

// withDefaults fills the keys whose zero value means "default".
func (c Config) withDefaults() Config {
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.Upstream.APIKeyEnv == "" {
		c.Upstream.APIKeyEnv = DefaultAPIKeyEnv
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
	return c.Upstream.validate()
}

func (u UpstreamConfig) validate() error {
	if !finiteNonNegative(u.TimeoutMS) {
		return fmt.Errorf("model: upstream.timeout_ms must be a finite number >= 0, got %v", u.TimeoutMS)
	}
	if u.BaseURL == "" {
		return nil
	}
	p, err := url.Parse(u.BaseURL)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		// The URL itself is left out: it may carry credentials.
		return fmt.Errorf("model: upstream.base_url must be an absolute http or https URL")
	}
	if u.Model == "" {
		return fmt.Errorf("model: upstream.model is required when upstream.base_url is set")
	}
	return nil
}

func finiteNonNegative(f float64) bool { return f >= 0 && !math.IsInf(f, 0) }

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

// String describes u with the API key hidden.
func (u UpstreamConfig) String() string {
	return fmt.Sprintf("{BaseURL:%s APIKey:%s APIKeyEnv:%s Model:%s TimeoutMS:%v}",
		safeBase(u.BaseURL), hidden(u.APIKey), u.APIKeyEnv, u.Model, u.TimeoutMS)
}

// LogValue implements slog.LogValuer with the API key hidden.
func (u UpstreamConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", safeBase(u.BaseURL)),
		slog.String("api_key", hidden(u.APIKey)),
		slog.String("api_key_env", u.APIKeyEnv),
		slog.String("model", u.Model),
		slog.Float64("timeout_ms", u.TimeoutMS),
	)
}

func hidden(key string) string {
	if key == "" {
		return ""
	}
	return "[REDACTED]"
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
