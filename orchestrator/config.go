package orchestrator

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/servers/registry"
	"github.com/gymlens/gymlens/telemetry"
)

// ServerSpec is one server instance of the fleet, read from the config
// dict: the top-level key `<Name>: {<Type>: {<Impl>: {...}}}`.
type ServerSpec struct {
	// Name is the instance name (the top-level key), unique in the fleet;
	// it becomes nemo.gym.server.name and the child's NEMO_GYM_CONFIG_PATH.
	Name string `yaml:"name" json:"name"`
	// Type is resources_servers, responses_api_models,
	// responses_api_agents or environment_servers.
	Type string `yaml:"type" json:"type"`
	// Impl is the one key under the type: a built-in implementation (see
	// package registry), or any name when Command is set.
	Impl string `yaml:"impl" json:"impl"`
	// Host and Port are the block's host and port as the file gives them;
	// "" and 0 are filled in when the fleet starts (default_host, a random
	// free port in [port_range_low, port_range_high]).
	Host string `yaml:"host,omitempty" json:"host,omitempty"`
	Port int    `yaml:"port,omitempty" json:"port,omitempty"`
	// MetricsAddr fixes where the child's prometheus exporter serves
	// /metrics; empty means a free loopback port chosen at start.
	MetricsAddr string `yaml:"metrics_addr,omitempty" json:"metrics_addr,omitempty"`
	// ModelServer and ResourcesServer are the instance names an agent's
	// model_server and resources_server references point at.
	ModelServer     string `yaml:"model_server,omitempty" json:"model_server,omitempty"`
	ResourcesServer string `yaml:"resources_server,omitempty" json:"resources_server,omitempty"`
	// AgentServer is the agent instance an environment server's
	// agent_server reference points at.
	AgentServer string `yaml:"agent_server,omitempty" json:"agent_server,omitempty"`
	// Config is the implementation's part of the block: the block minus
	// launcher keys and references (gymconfig.Instance.ImplConfig).
	Config map[string]any `yaml:"config,omitempty" json:"config,omitempty"`
	// Command is the argv of an external server (the block's `command:`);
	// nil for a built-in, which runs as `gymlens serve`.
	Command []string `yaml:"command,omitempty" json:"command,omitempty"`
	// Dir is the directory of the config file: relative paths of Command
	// are resolved against it and an external server runs in it. Empty
	// means the orchestrator's working directory.
	Dir string `yaml:"-" json:"-"`
	// LivenessBudget is how long the server may go without answering its
	// liveness probes before the fleet declares it dead: the block's
	// liveness_timeout_seconds, else the file's top-level one; 0 (neither
	// given) means Options.LivenessBudget.
	LivenessBudget time.Duration `yaml:"-" json:"-"`
	// remote is set when Host is not this machine (see hostIsLocal),
	// decided once, when the config is checked: the fleet waits for such a
	// server to join instead of starting it.
	remote bool
}

// External reports whether the server runs its own command rather than a
// built-in implementation.
func (s ServerSpec) External() bool { return len(s.Command) > 0 }

// Config is a validated fleet configuration: NeMo Gym's config dict.
type Config struct {
	// Servers are the dict's server instances, in document order.
	Servers []ServerSpec
	// Telemetry is the parsed `telemetry:` block.
	Telemetry telemetry.Config
	// Dict is the config dict every child receives (as
	// NEMO_GYM_CONFIG_DICT), interpolations unresolved. Start works on a
	// copy, so a Config can be started more than once.
	Dict *gymconfig.Dict
	// Dir is the directory of the config file ("" for DefaultConfig and
	// ParseConfig: the working directory).
	Dir string
	// LivenessBudget is the file's top-level liveness_timeout_seconds; 0
	// when it gives none. A server block's own value overrides it (see
	// ServerSpec.LivenessBudget).
	LivenessBudget time.Duration

	// budgets are the server blocks' own liveness_timeout_seconds, by
	// instance name. The key is taken out of the blocks (see
	// takeLivenessBudgets), so they are kept here for Set.
	budgets  map[string]time.Duration
	resolved *gymconfig.Config
}

// defaultFleet is the built-in fleet: one server of each type, the agent
// pointing at the resources and model servers, the environment server at
// the agent.
const defaultFleet = `arithmetic:
  resources_servers:
    arithmetic:
      domain: math
policy_model:
  responses_api_models:
    policy_model: {}
simple_agent:
  responses_api_agents:
    simple_agent:
      resources_server: {type: resources_servers, name: arithmetic}
      model_server: {type: responses_api_models, name: policy_model}
simple_agent_environment_server:
  environment_servers:
    legacy_agent:
      agent_server: {type: responses_api_agents, name: simple_agent}
`

// DefaultConfig is the built-in fleet: arithmetic (resources_servers),
// policy_model (responses_api_models), simple_agent (responses_api_agents,
// referencing the other two) and simple_agent_environment_server
// (environment_servers: the legacy_agent relay through which NeMo Gym
// 0.7's collector reaches simple_agent), parsed like a file.
func DefaultConfig() Config {
	cfg, err := ParseConfig([]byte(defaultFleet))
	if err != nil {
		// The document is a constant, checked by the tests.
		panic("orchestrator: built-in fleet: " + err.Error())
	}
	return cfg
}

// DefaultConfigYAML returns the built-in fleet as a config file.
func DefaultConfigYAML() []byte { return []byte(defaultFleet) }

// LoadConfig reads and validates a fleet config file. Relative paths in
// its servers' `command:` are resolved against the file's directory.
func LoadConfig(path string) (Config, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("fleet config: %w", err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return Config{}, fmt.Errorf("fleet config %s: %w", path, err)
	}
	cfg, err := parseConfig(doc, dir)
	if err != nil {
		return Config{}, fmt.Errorf("fleet config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig parses and validates a fleet config document (NeMo Gym's
// config dict) whose relative paths are relative to the working directory.
func ParseConfig(doc []byte) (Config, error) { return parseConfig(doc, "") }

// oldShapeHelp is the error for a file in the `servers:` list shape that
// gymlens used before it read NeMo Gym's config dict.
const oldShapeHelp = "the file uses gymlens's old `servers:` list shape; a fleet file is now NeMo Gym's config dict, one top-level key per server instance:\n" +
	"  arithmetic:\n" +
	"    resources_servers:\n" +
	"      arithmetic: {domain: math}\n" +
	"  policy_model:\n" +
	"    responses_api_models:\n" +
	"      policy_model: {correct_probability: 0.8}\n" +
	"  simple_agent:\n" +
	"    responses_api_agents:\n" +
	"      simple_agent:\n" +
	"        resources_server: {type: resources_servers, name: arithmetic}\n" +
	"        model_server: {type: responses_api_models, name: policy_model}\n" +
	"(an old entry's name becomes the top-level key, type and impl the two levels below it, config: its keys)"

func parseConfig(doc []byte, dir string) (Config, error) {
	d, err := gymconfig.Parse(doc)
	if err != nil {
		return Config{}, err
	}
	if _, old := d.Get([]string{"servers"}); old {
		return Config{}, errors.New(oldShapeHelp)
	}
	// The telemetry block and the servers are checked both, so one run
	// reports every mistake of the file.
	tcfg, terr := telemetry.ConfigFromYAML(doc)
	cfg := Config{Telemetry: tcfg, Dict: d, Dir: dir}
	lerr := cfg.takeLivenessBudgets()
	if err := errors.Join(terr, lerr, cfg.frontAgents(), cfg.validate(true)); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// frontAgents gives every agent that no environment server names a
// generated legacy_agent relay, in the dict, as upstream's parser does
// (gymconfig's Dict.FrontAgents, which logs upstream's deprecation
// notice). A dict that does not resolve is left to validate to report.
func (c *Config) frontAgents() error {
	if _, err := c.Dict.Resolve(os.LookupEnv); err != nil {
		return nil
	}
	_, err := c.Dict.FrontAgents(os.LookupEnv, nil)
	return err
}

// Set sets a key of the config dict (path from the top level, e.g.
// policy_model.responses_api_models.policy_model.seed) and validates the
// result again, so the children see the value and a bad one is reported
// before anything starts.
func (c *Config) Set(path []string, v any) error {
	if c.Dict == nil {
		return errors.New("orchestrator: empty config")
	}
	d, err := gymconfig.Parse(c.Dict.YAML())
	if err != nil {
		return err
	}
	if err := d.Set(path, v); err != nil {
		return fmt.Errorf("set %s: %w", strings.Join(path, "."), err)
	}
	next := Config{Telemetry: c.Telemetry, Dict: d, Dir: c.Dir, budgets: maps.Clone(c.budgets)}
	if err := errors.Join(next.takeLivenessBudgets(), next.validate(false)); err != nil {
		return err
	}
	*c = next
	return nil
}

// ImplPath returns the dict path of a key in server name's block:
// [name, type, impl, key].
func (c Config) ImplPath(name, key string) ([]string, bool) {
	for _, s := range c.Servers {
		if s.Name == name {
			return []string{s.Name, s.Type, s.Impl, key}, true
		}
	}
	return nil, false
}

// Redacted returns the resolved config dict with every secret (API keys,
// tokens, passwords: lens.IsSensitiveKey) replaced and the credentials of
// every URL in its strings scrubbed (gymconfig.ScrubURLs: user information,
// query, fragment), fit to be written to disk.
func (c Config) Redacted() map[string]any {
	if c.resolved == nil {
		return nil
	}
	return c.resolved.Redacted()
}

// HeadServerGiven reports whether the dict names the head server's address
// itself (head_server:), rather than leaving it to the default.
func (c Config) HeadServerGiven() bool {
	if c.Dict == nil {
		return false
	}
	_, ok := c.Dict.Get([]string{gymconfig.KeyHeadServer})
	return ok
}

// headPortGiven reports whether the dict gives head_server.port itself.
func headPortGiven(d *gymconfig.Dict) bool {
	_, ok := d.Get([]string{gymconfig.KeyHeadServer, "port"})
	return ok
}

// validate resolves the dict and checks instances, implementations, their
// configs, references and fixed ports, filling c.Servers. With fillRefs,
// an agent without a model_server or resources_server reference gets the
// only server of that type, written into the dict.
func (c *Config) validate(fillRefs bool) error {
	gc, err := c.Dict.Resolve(os.LookupEnv)
	if err != nil {
		return err
	}
	if len(gc.Instances) == 0 {
		if err := typoedTypes(gc); err != nil {
			return err
		}
		return errors.New("no server instances: a server is a top-level key shaped <name>: {<" + strings.Join(contract.ServerTypes(), "|") + ">: {<impl>: {...}}}")
	}
	if err := typoedTypes(gc); err != nil {
		return err
	}
	if fillRefs {
		changed, err := fillAgentRefs(c.Dict, gc)
		if err != nil {
			return err
		}
		if changed {
			if gc, err = c.Dict.Resolve(os.LookupEnv); err != nil {
				return err
			}
		}
	}
	if err := gc.CheckRefs(); err != nil {
		return err
	}
	var errs []error
	var servers []ServerSpec
	fixed := map[string]string{} // host:port -> instance
	headHost, headPort := gc.HeadServer()
	if headPortGiven(c.Dict) && headPort != 0 {
		hp := net.JoinHostPort(headHost, strconv.Itoa(headPort))
		fixed[hp] = gymconfig.KeyHeadServer
		if err := checkFree(hp); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", gymconfig.KeyHeadServer, hp, err))
		}
	}
	defaultHost := defaultHostOf(gc)
	localIPs, err := interfaceIPs()
	if err != nil {
		return fmt.Errorf("this host's addresses: %w", err)
	}
	for _, inst := range gc.Instances {
		spec, err := specOf(inst, c.Dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		host := spec.Host
		if host == "" {
			host = defaultHost
		}
		// A server on another host binds there: its ports are not this
		// host's to check.
		local, err := hostIsLocal(host, localIPs, net.LookupHost)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", blockPath(inst), err))
			continue
		}
		if spec.Port != 0 {
			hp := net.JoinHostPort(host, strconv.Itoa(spec.Port))
			if other, dup := fixed[hp]; dup {
				errs = append(errs, fmt.Errorf("%s: port %s is also given to %q", blockPath(inst), hp, other))
			} else if local {
				if err := checkFree(hp); err != nil {
					errs = append(errs, fmt.Errorf("%s: port %s: %w", blockPath(inst), hp, err))
				}
			}
			fixed[hp] = inst.Name
		}
		if spec.MetricsAddr != "" && local {
			if err := checkAddr(spec.MetricsAddr); err != nil {
				errs = append(errs, fmt.Errorf("%s.metrics_addr: %s: %w", blockPath(inst), spec.MetricsAddr, err))
			} else if other, dup := fixed[spec.MetricsAddr]; dup && !strings.HasSuffix(spec.MetricsAddr, ":0") {
				errs = append(errs, fmt.Errorf("%s.metrics_addr: %s is also used by %q", blockPath(inst), spec.MetricsAddr, other))
			}
			fixed[spec.MetricsAddr] = inst.Name
		}
		spec.remote = !local
		spec.LivenessBudget = c.LivenessBudget
		if b, ok := c.budgets[spec.Name]; ok {
			spec.LivenessBudget = b
		}
		servers = append(servers, spec)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.Servers = servers
	c.resolved = gc
	return nil
}

// KeyLivenessTimeoutSeconds is the setting, in seconds, of how long a
// server may go without answering its liveness probes (GET /) before the
// fleet declares it dead: at the top level of the config dict for every
// server, and in a server block for that server; null is the same as
// leaving it out. Upstream has no such key
// (it is none of gymconfig.IsReserved's), and a top-level scalar is no
// server instance to upstream (config_types.py:778-779,
// maybe_get_server_instance_config), so upstream's servers ignore the
// top-level one. The block one is taken out of the dict the servers get:
// upstream's environment servers refuse unknown block keys
// (base_environment_server.py:34, extra="forbid").
const KeyLivenessTimeoutSeconds = "liveness_timeout_seconds"

// takeLivenessBudgets reads KeyLivenessTimeoutSeconds at the top level of
// c.Dict (into c.LivenessBudget) and in every server block (into
// c.budgets, over what it held), and deletes it from the blocks. A dict
// that does not resolve is left to validate to report.
func (c *Config) takeLivenessBudgets() error {
	gc, err := c.Dict.Resolve(os.LookupEnv)
	if err != nil {
		return nil
	}
	var errs []error
	c.LivenessBudget = 0
	if v := gc.Root[KeyLivenessTimeoutSeconds]; v != nil {
		b, err := livenessBudget(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", KeyLivenessTimeoutSeconds, err))
		}
		c.LivenessBudget = b
	}
	for _, inst := range gc.Instances {
		v, ok := inst.Block[KeyLivenessTimeoutSeconds]
		if !ok {
			continue
		}
		// Out of the servers' dict, even when bad: reported once, here.
		c.Dict.Delete([]string{inst.Name, inst.Type, inst.Impl, KeyLivenessTimeoutSeconds})
		if v == nil {
			delete(c.budgets, inst.Name)
			continue
		}
		b, err := livenessBudget(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", blockPath(inst), KeyLivenessTimeoutSeconds, err))
			continue
		}
		if c.budgets == nil {
			c.budgets = map[string]time.Duration{}
		}
		c.budgets[inst.Name] = b
	}
	return errors.Join(errs...)
}

// livenessBudget reads a liveness_timeout_seconds value: a number of
// seconds above 0, or a string holding one (what an ${oc.env:...}
// interpolation gives, as upstream reads server_spinup_timeout_seconds,
// cli/env.py:310-327).
func livenessBudget(v any) (time.Duration, error) {
	var secs float64
	switch x := v.(type) {
	case int:
		secs = float64(x)
	case int64:
		secs = float64(x)
	case uint64:
		secs = float64(x)
	case float64:
		secs = x
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, fmt.Errorf("want a number of seconds above 0, got %q", x)
		}
		secs = f
	default:
		return 0, fmt.Errorf("want a number of seconds above 0, got %v", v)
	}
	// Up to a year: beyond, the duration would overflow long before.
	if math.IsNaN(secs) || secs <= 0 || secs > 365*24*3600 {
		return 0, fmt.Errorf("want a number of seconds above 0 (at most a year), got %v", v)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// blockPath is the dotted path of an instance's block.
func blockPath(inst gymconfig.Instance) string {
	return inst.Name + "." + inst.Type + "." + inst.Impl
}

func defaultHostOf(gc *gymconfig.Config) string {
	if h, ok := gc.Root[gymconfig.KeyDefaultHost].(string); ok && h != "" {
		return h
	}
	return gymconfig.DefaultHost
}

// specOf checks one instance and describes it.
func specOf(inst gymconfig.Instance, dir string) (ServerSpec, error) {
	where := blockPath(inst)
	if inst.Name == "" || inst.Name == "orchestrator" || strings.ContainsAny(inst.Name, "/ \t") || strings.ContainsFunc(inst.Name, unicode.IsControl) {
		// The name becomes file names (<name>.jsonl, <name>.log), service
		// names and head-server keys: an empty one would name nothing.
		return ServerSpec{}, fmt.Errorf("%q: an instance name must not be empty, contain '/' or spaces, nor be \"orchestrator\"", inst.Name)
	}
	argv, err := inst.Command()
	if err != nil {
		return ServerSpec{}, fmt.Errorf("%s.%s: %w", where, gymconfig.KeyCommand, err)
	}
	spec := ServerSpec{
		Name: inst.Name, Type: inst.Type, Impl: inst.Impl,
		Host: inst.Host(), Port: inst.Port(),
		Config: inst.ImplConfig(), Command: argv, Dir: dir,
	}
	if v, ok := inst.Block["metrics_addr"]; ok && v != nil {
		s, isString := v.(string)
		if !isString {
			return ServerSpec{}, fmt.Errorf("%s.metrics_addr: want a host:port string, got %v", where, v)
		}
		// An empty host (":0") is loopback, as everywhere in the fleet.
		addr, err := contract.ListenAddr(s)
		if err != nil {
			return ServerSpec{}, fmt.Errorf("%s.metrics_addr: %s: %w", where, s, err)
		}
		spec.MetricsAddr = addr
	}
	refs := inst.Refs()
	for field, ref := range refs {
		switch field {
		case "model_server":
			spec.ModelServer = ref.Name
		case "resources_server":
			spec.ResourcesServer = ref.Name
		case gymconfig.KeyAgentServer:
			if inst.Type == contract.ServerTypeEnvironment && ref.Type == contract.ServerTypeAgent {
				spec.AgentServer = ref.Name
			}
		}
	}
	if spec.External() {
		// Its block is its own business: no registry entry decodes it.
		return spec, nil
	}
	if inst.Type == contract.ServerTypeEnvironment && spec.AgentServer == "" {
		if _, given := inst.Block[gymconfig.KeyAgentServer]; !given {
			return ServerSpec{}, fmt.Errorf("%s.%s: required: the agent this environment server fronts, {type: %s, name: <agent instance>}",
				where, gymconfig.KeyAgentServer, contract.ServerTypeAgent)
		}
	}
	impl, ok := registry.Lookup(inst.Type, inst.Impl)
	if !ok {
		known := registry.Names(inst.Type)
		msg := fmt.Sprintf("%s: unknown implementation %q of %s (built-in: %s", where, inst.Impl, inst.Type, strings.Join(known, ", "))
		if near := gymconfig.Nearest(inst.Impl, known); near != "" {
			msg += fmt.Sprintf("; did you mean %q?", near)
		}
		return ServerSpec{}, errors.New(msg + "); an external server needs a command: [argv...]")
	}
	if err := checkImplConfig(impl, where, spec.Config); err != nil {
		return ServerSpec{}, err
	}
	return spec, nil
}

// typoedTypes reports a top-level key shaped like a server instance whose
// type is a near miss of a server type (resource_server for
// resources_servers): upstream would silently not start it.
func typoedTypes(gc *gymconfig.Config) error {
	types := contract.ServerTypes()
	var errs []error
	keys := make([]string, 0, len(gc.Root))
	for k := range gc.Root {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, name := range keys {
		if gymconfig.IsReserved(name) {
			continue
		}
		m, ok := gc.Root[name].(map[string]any)
		if !ok || len(m) != 1 {
			continue
		}
		for typ, v := range m {
			if slices.Contains(types, typ) {
				continue
			}
			if _, isMap := v.(map[string]any); !isMap {
				continue
			}
			if near := gymconfig.Nearest(typ, types); near != "" {
				errs = append(errs, fmt.Errorf("%s: unknown server type %q (did you mean %q? server types: %s)", name, typ, near, strings.Join(types, ", ")))
			}
		}
	}
	return errors.Join(errs...)
}

// refFields are an agent's references and the server type each points at.
var refFields = []struct{ field, typ string }{
	{"model_server", contract.ServerTypeModel},
	{"resources_server", contract.ServerTypeResources},
}

// fillAgentRefs gives every agent without a model_server or
// resources_server reference the only server of that type, in the dict
// (so the children see it). When there is none or more than one, a
// built-in agent is an error; an external one is left alone.
func fillAgentRefs(d *gymconfig.Dict, gc *gymconfig.Config) (changed bool, err error) {
	byType := map[string][]string{}
	for _, inst := range gc.Instances {
		byType[inst.Type] = append(byType[inst.Type], inst.Name)
	}
	var errs []error
	for _, inst := range gc.Instances {
		if inst.Type != contract.ServerTypeAgent {
			continue
		}
		argv, _ := inst.Command() // a bad command is reported later
		external := len(argv) > 0
		refs := inst.Refs()
		for _, rf := range refFields {
			if _, ok := refs[rf.field]; ok {
				continue
			}
			path := []string{inst.Name, inst.Type, inst.Impl, rf.field}
			if v, present := inst.Block[rf.field]; present {
				if external {
					continue
				}
				errs = append(errs, fmt.Errorf("%s: want a reference {type: %s, name: <instance>}, got %v", strings.Join(path, "."), rf.typ, v))
				continue
			}
			candidates := byType[rf.typ]
			if len(candidates) != 1 {
				if !external {
					errs = append(errs, fmt.Errorf("%s: missing; the fleet has %d %s instances (%s), so name one: %s: {type: %s, name: <instance>}",
						strings.Join(path, "."), len(candidates), rf.typ, strings.Join(candidates, ", "), rf.field, rf.typ))
				}
				continue
			}
			if err := d.Set(path, map[string]any{"type": rf.typ, "name": candidates[0]}); err != nil {
				return false, err
			}
			changed = true
		}
	}
	return changed, errors.Join(errs...)
}

// checkImplConfig decodes a built-in server's configuration into its
// implementation's Config, so a typo in a key or a bad value is reported
// before anything is spawned rather than as a child that fails (or, worse,
// silently ignores the key).
func checkImplConfig(impl registry.Impl, where string, cfg map[string]any) error {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	decoded, err := impl.DecodeAt(raw, where)
	if err != nil {
		return err
	}
	// An agent's peer URLs are filled in at start; the registry's Validate
	// leaves them out.
	if err := impl.Validate(decoded); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

// checkAddr verifies that a fixed listen address, read as
// contract.ListenAddr reads it (an empty host is loopback), has a port
// and, unless the port is 0 (any free port), that it is free right now.
func checkAddr(addr string) error {
	addr, err := contract.ListenAddr(addr)
	if err != nil {
		return err
	}
	if _, port, _ := net.SplitHostPort(addr); port == "0" {
		return nil
	}
	return checkFree(addr)
}

// checkFree verifies nothing listens on host:port by listening on it.
func checkFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("not available: %w", err)
	}
	return ln.Close()
}

// Agents returns the agent servers.
func (c Config) Agents() []ServerSpec {
	var out []ServerSpec
	for _, s := range c.Servers {
		if s.Type == contract.ServerTypeAgent {
			out = append(out, s)
		}
	}
	return out
}
