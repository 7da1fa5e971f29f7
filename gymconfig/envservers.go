package gymconfig

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/contract"
)

// Environment servers (environment_servers), NeMo Gym 0.7's fourth server
// type: rollout collection reaches an agent only through the one
// environment server that names it.
const (
	// KeyAgentServer is the field an environment server names its agent
	// in: {type: responses_api_agents, name: <agent instance>}.
	KeyAgentServer = "agent_server"
	// KeyErrorOnAgentWithoutEnvironmentServer is the top-level switch that
	// makes an agent no environment server names an error instead of
	// giving it a generated relay. Upstream reads it but does not reserve
	// it.
	KeyErrorOnAgentWithoutEnvironmentServer = "error_on_agent_without_environment_server"
	// LegacyAgentImpl is the relay implementation generated for such an
	// agent.
	LegacyAgentImpl = "legacy_agent"
	// LegacyEnvironmentServerSuffix ends a generated relay's name.
	LegacyEnvironmentServerSuffix = "_environment_server"
)

// ErrAgentWithoutEnvironmentServer is wrapped by FrontAgents' error when
// the config sets error_on_agent_without_environment_server and an agent
// has no environment server (upstream's AgentWithoutEnvironmentServerError).
var ErrAgentWithoutEnvironmentServer = errors.New("agent instance(s) have no environment server")

// EnvironmentAgents returns the agents an environment server's block
// references, as upstream reads them: every field whose value is a
// mapping with type responses_api_agents and a name, and agent_server
// when it gives a name and leaves the type out.
func EnvironmentAgents(block map[string]any) []string {
	var out []string
	for _, field := range sortedKeys(block) {
		m, ok := block[field].(map[string]any)
		if !ok {
			continue
		}
		typ, hasType := m["type"]
		if typ != contract.ServerTypeAgent && (field != KeyAgentServer || (hasType && typ != nil)) {
			continue
		}
		if name, ok := m["name"]; ok && name != nil {
			out = append(out, pyStr(name))
		}
	}
	return out
}

// LegacyEnvironmentServerName names the relay generated for agent
// instance agent of implementation impl, by upstream's rule: the agent's
// name without a trailing _<impl> (or <impl>), else without a trailing
// _agent, trailing underscores trimmed, then _environment_server; impl
// stands in for an empty stem. string_match_simple_agent (simple_agent)
// gives string_match_environment_server, simple_agent (simple_agent)
// simple_agent_environment_server.
func LegacyEnvironmentServerName(agent, impl string) string {
	stem := strings.TrimRight(strings.TrimSuffix(strings.TrimSuffix(agent, "_"+impl), impl), "_")
	if stem == agent {
		stem = strings.TrimRight(strings.TrimSuffix(agent, "_agent"), "_")
	}
	if stem == "" {
		stem = impl
	}
	return stem + LegacyEnvironmentServerSuffix
}

// LegacyEnvironmentServerBlock is the value of the top-level key a relay
// for agent is generated under, as upstream writes it.
func LegacyEnvironmentServerBlock(agent string) map[string]any {
	return map[string]any{contract.ServerTypeEnvironment: map[string]any{LegacyAgentImpl: map[string]any{
		"entrypoint":   "app.py",
		KeyAgentServer: map[string]any{"type": contract.ServerTypeAgent, "name": agent},
	}}}
}

// Relay is one generated environment server.
type Relay struct {
	// Agent is the agent instance it fronts; Server is its instance name.
	Agent, Server string
}

// FrontAgents gives every agent instance that no environment server names
// a legacy_agent relay, written into d (so YAML carries it and every
// server of the fleet sees it), as upstream's parser does after it has
// composed the config, and logs upstream's DEPRECATED notice once on log
// (nil means slog.Default()) listing them and the blocks to declare. A
// relay is named by LegacyEnvironmentServerName; when that name is taken
// (by a key of the config or an earlier relay) it is
// <agent>_environment_server, with _environment_server added again while
// the config has that key. Agents get their relays in name order.
//
// Upstream leaves out an agent without an entrypoint, which it could not
// start, and a swap source (an agent whose resources_server name is ???);
// gymlens starts every agent instance (a built-in needs no entrypoint) and
// refuses a config with a ??? value, so every agent counts.
//
// With error_on_agent_without_environment_server true, such an agent is
// an error wrapping ErrAgentWithoutEnvironmentServer, listing them, and d
// is left alone. d must resolve (lookupEnv answers oc.env, nil means
// os.LookupEnv). It returns the relays made.
func (d *Dict) FrontAgents(lookupEnv func(string) (string, bool), log *slog.Logger) ([]Relay, error) {
	cfg, err := d.Resolve(lookupEnv)
	if err != nil {
		return nil, err
	}
	named := map[string]bool{}
	for _, in := range cfg.Instances {
		if in.Type == contract.ServerTypeEnvironment {
			for _, a := range EnvironmentAgents(in.Block) {
				named[a] = true
			}
		}
	}
	var without []Instance
	for _, in := range cfg.Instances {
		if in.Type == contract.ServerTypeAgent && !named[in.Name] {
			without = append(without, in)
		}
	}
	if len(without) == 0 {
		return nil, nil
	}
	slices.SortFunc(without, func(a, b Instance) int { return strings.Compare(a.Name, b.Name) })
	if on, _ := asBool(cfg.Root[KeyErrorOnAgentWithoutEnvironmentServer]); on {
		names := make([]string, len(without))
		for i, in := range without {
			names[i] = in.Name
		}
		return nil, fmt.Errorf("%w, so rollout collection cannot reach them: %s; declare one for each, naming the agent in its %s reference (%s: {type: %s, name: <agent>}), or unset %s to generate a %s relay for each",
			ErrAgentWithoutEnvironmentServer, strings.Join(names, ", "), KeyAgentServer, KeyAgentServer, contract.ServerTypeAgent,
			KeyErrorOnAgentWithoutEnvironmentServer, LegacyAgentImpl)
	}
	work := &Dict{root: cloneNode(d.root)}
	taken := func(name string) bool { _, ok := work.Get([]string{name}); return ok }
	var made []Relay
	for _, in := range without {
		name := LegacyEnvironmentServerName(in.Name, in.Impl)
		if taken(name) || slices.ContainsFunc(made, func(r Relay) bool { return r.Server == name }) {
			name = in.Name + LegacyEnvironmentServerSuffix
		}
		for taken(name) {
			name += LegacyEnvironmentServerSuffix
		}
		if err := work.Set([]string{name}, LegacyEnvironmentServerBlock(in.Name)); err != nil {
			return nil, err
		}
		made = append(made, Relay{Agent: in.Name, Server: name})
	}
	d.root = work.root
	if log == nil {
		log = slog.Default()
	}
	log.Warn(DeprecationNotice(made))
	return made, nil
}

// DeprecationNotice is upstream's warning for the relays it generated:
// which agents, why, and the blocks to declare instead.
func DeprecationNotice(made []Relay) string {
	agents := make([]string, len(made))
	var blocks []string
	for i, r := range made {
		agents[i] = "`" + r.Agent + "`"
		blocks = append(blocks, relayYAML(r))
	}
	var indented strings.Builder
	for line := range strings.SplitAfterSeq(strings.Join(blocks, "\n"), "\n") {
		if strings.TrimSpace(line) != "" {
			indented.WriteString("     ")
		}
		indented.WriteString(line)
	}
	return "DEPRECATED: agents without an environment server: " + strings.Join(agents, ", ") + ".\n" +
		"Rollout collection reaches an agent only through an environment server.\n" +
		"This run generated a legacy_agent environment server for each agent above.\n" +
		"Each one relays /run to its agent unchanged, so results are not affected.\n" +
		"A future release will reject these configs with AgentWithoutEnvironmentServerError.\n\n" +
		"To migrate, declare the environment servers in your config. Either:\n\n" +
		"1. Run the migration script from a NeMo Gym checkout on your config files or directories:\n\n" +
		"     python scripts/add_legacy_agent_environment_servers.py path/to/config.yaml [more paths] [--check]\n\n" +
		"   --check reports what would change without writing.\n\n" +
		"2. Or add these blocks yourself, at the same level as the agents:\n\n" +
		indented.String() + "\n" +
		"To make this an error now, set " + KeyErrorOnAgentWithoutEnvironmentServer + ": true in your config.\n" +
		"You can also pass +" + KeyErrorOnAgentWithoutEnvironmentServer + "=true on the command line."
}

// relayYAML is one relay's block as YAML, keys in upstream's order.
func relayYAML(r Relay) string {
	n := &yaml.Node{Kind: yaml.MappingNode}
	add := func(m *yaml.Node, k string, v *yaml.Node) *yaml.Node {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, v)
		return v
	}
	mapping := func() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode} }
	scalar := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }
	impl := add(add(add(n, r.Server, mapping()), contract.ServerTypeEnvironment, mapping()), LegacyAgentImpl, mapping())
	add(impl, "entrypoint", scalar("app.py"))
	ref := add(impl, KeyAgentServer, mapping())
	add(ref, "type", scalar(contract.ServerTypeAgent))
	add(ref, "name", scalar(r.Agent))
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return r.Server + ": " + err.Error() + "\n"
	}
	_ = enc.Close()
	return buf.String()
}
