package orchestrator

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/servers/registry"
	"github.com/gymlens/gymlens/telemetry"
)

// DefaultImpl returns the implementation used for serverType when none is
// named, or "" for an unknown type.
func DefaultImpl(serverType string) string { return registry.Default(serverType) }

// ServerSpec is one server of the fleet.
type ServerSpec struct {
	// Name is unique in the fleet; it becomes nemo.gym.server.name.
	Name string `yaml:"name" json:"name"`
	// Type is resources_servers, responses_api_models or
	// responses_api_agents.
	Type string `yaml:"type" json:"type"`
	// Impl picks the built-in implementation (see package registry);
	// empty means the type's default (arithmetic, policy_model,
	// simple_agent).
	Impl string `yaml:"impl,omitempty" json:"impl,omitempty"`
	// Addr fixes the listen address; empty means a free loopback port.
	Addr string `yaml:"addr,omitempty" json:"addr,omitempty"`
	// MetricsAddr fixes where the prometheus exporter serves /metrics;
	// empty means a free loopback port.
	MetricsAddr string `yaml:"metrics_addr,omitempty" json:"metrics_addr,omitempty"`
	// ModelServer and ResourcesServer name an agent's peers; empty means
	// the only server of that type.
	ModelServer     string `yaml:"model_server,omitempty" json:"model_server,omitempty"`
	ResourcesServer string `yaml:"resources_server,omitempty" json:"resources_server,omitempty"`
	// Config is handed to the implementation as JSON.
	Config map[string]any `yaml:"config,omitempty" json:"config,omitempty"`
}

// Config is a fleet configuration file.
type Config struct {
	Servers []ServerSpec `yaml:"servers" json:"servers"`
	// Telemetry is the parsed `telemetry:` block.
	Telemetry telemetry.Config `yaml:"-" json:"-"`
}

// DefaultConfig is the built-in fleet: one server of each type.
func DefaultConfig() Config {
	return Config{Servers: []ServerSpec{
		{Name: "arithmetic", Type: telemetry.ServerTypeResources},
		{Name: "policy_model", Type: telemetry.ServerTypeModel},
		{Name: "simple_agent", Type: telemetry.ServerTypeAgent},
	}}
}

// LoadConfig reads and validates a fleet configuration file.
func LoadConfig(path string) (Config, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("fleet config: %w", err)
	}
	cfg, err := ParseConfig(doc)
	if err != nil {
		return Config{}, fmt.Errorf("fleet config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig parses and validates a fleet configuration document.
func ParseConfig(doc []byte) (Config, error) {
	var cfg Config
	var raw struct {
		Servers []ServerSpec `yaml:"servers"`
	}
	if err := yaml.Unmarshal(doc, &raw); err != nil {
		return Config{}, fmt.Errorf("parse YAML: %w", err)
	}
	cfg.Servers = raw.Servers
	tcfg, err := telemetry.ConfigFromYAML(doc)
	if err != nil {
		return Config{}, err
	}
	cfg.Telemetry = tcfg
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate checks names, types, implementations, agent references and
// fixed addresses (a fixed port already taken is reported here, before
// anything is spawned). It fills in default implementations and peers.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Servers) == 0 {
		return errors.New("no servers configured")
	}
	seen := map[string]bool{}
	addrs := map[string]string{}
	byType := map[string][]string{}
	for i := range c.Servers {
		s := &c.Servers[i]
		s.Name = strings.TrimSpace(s.Name)
		where := fmt.Sprintf("servers[%d]", i)
		if s.Name != "" {
			where = fmt.Sprintf("server %q", s.Name)
		}
		switch {
		case s.Name == "":
			errs = append(errs, fmt.Errorf("%s: name is required", where))
		case strings.ContainsAny(s.Name, "/ \t") || strings.ContainsFunc(s.Name, unicode.IsControl) || s.Name == "orchestrator":
			errs = append(errs, fmt.Errorf("%s: name must not contain '/' or spaces, nor be \"orchestrator\"", where))
		case seen[s.Name]:
			errs = append(errs, fmt.Errorf("%s: duplicate name", where))
		}
		seen[s.Name] = true
		if registry.Default(s.Type) == "" {
			errs = append(errs, fmt.Errorf("%s: unknown server type %q (valid: %s, %s, %s)", where, s.Type,
				telemetry.ServerTypeResources, telemetry.ServerTypeModel, telemetry.ServerTypeAgent))
			continue
		}
		if s.Impl == "" {
			s.Impl = registry.Default(s.Type)
		}
		if impl, ok := registry.ByName(s.Impl); !ok {
			errs = append(errs, fmt.Errorf("%s: unknown implementation %q (%s: %s)", where, s.Impl, s.Type,
				strings.Join(registry.Names(s.Type), ", ")))
		} else if impl.Type != s.Type {
			errs = append(errs, fmt.Errorf("%s: implementation %q serves %s, not %s", where, s.Impl, impl.Type, s.Type))
		}
		if s.MetricsAddr != "" {
			if other, dup := addrs[s.MetricsAddr]; dup && !strings.HasSuffix(s.MetricsAddr, ":0") {
				errs = append(errs, fmt.Errorf("%s: metrics_addr %s is also used by server %q", where, s.MetricsAddr, other))
			}
			addrs[s.MetricsAddr] = s.Name
			if err := checkAddr(s.MetricsAddr); err != nil {
				errs = append(errs, fmt.Errorf("%s: metrics_addr %s: %w", where, s.MetricsAddr, err))
			}
		}
		if err := checkImplConfig(*s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		byType[s.Type] = append(byType[s.Type], s.Name)
		if s.Addr != "" {
			if other, dup := addrs[s.Addr]; dup && !strings.HasSuffix(s.Addr, ":0") {
				errs = append(errs, fmt.Errorf("%s: addr %s is also given to server %q", where, s.Addr, other))
			}
			addrs[s.Addr] = s.Name
			if err := checkAddr(s.Addr); err != nil {
				errs = append(errs, fmt.Errorf("%s: addr %s: %w", where, s.Addr, err))
			}
		}
	}
	for i := range c.Servers {
		s := &c.Servers[i]
		if s.Type != telemetry.ServerTypeAgent {
			continue
		}
		resolve := func(ref *string, typ, field string) {
			if *ref == "" {
				if len(byType[typ]) == 1 {
					*ref = byType[typ][0]
					return
				}
				errs = append(errs, fmt.Errorf("server %q: %s must name one of %d %s servers", s.Name, field, len(byType[typ]), typ))
				return
			}
			if !slices.Contains(byType[typ], *ref) {
				errs = append(errs, fmt.Errorf("server %q: %s %q is not a %s server of this fleet", s.Name, field, *ref, typ))
			}
		}
		resolve(&s.ModelServer, telemetry.ServerTypeModel, "model_server")
		resolve(&s.ResourcesServer, telemetry.ServerTypeResources, "resources_server")
	}
	return errors.Join(errs...)
}

// checkAddr verifies a fixed listen address is loopback-or-explicit and
// free right now.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if port == "" || port == "0" {
		return nil
	}
	if host == "" {
		return errors.New("give a host (127.0.0.1 keeps the server on this machine)")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("port not available: %w", err)
	}
	return ln.Close()
}

// Agents returns the agent servers.
func (c Config) Agents() []ServerSpec {
	var out []ServerSpec
	for _, s := range c.Servers {
		if s.Type == telemetry.ServerTypeAgent {
			out = append(out, s)
		}
	}
	return out
}
