package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/gymconfig"
)

// PathHeadConfig is the head server's route that answers the fleet's
// config dict: a JSON string holding its YAML, interpolations unresolved.
const PathHeadConfig = "/global_config_dict_yaml"

// headTimeout bounds the head server call when the client has no timeout
// of its own.
const headTimeout = 30 * time.Second

// maxHeadConfigBytes bounds the answer of the head server.
const maxHeadConfigBytes = 64 << 20

// Keys of a config block the collector reads to route rows.
const (
	keyResourcesServer = "resources_server"
	keyDatasets        = "datasets"
	keyDatasetAgent    = "agent"
)

// Fleet is what a collection reaches of a running fleet, read from its
// config (FleetFromConfig, HeadFleet): the Options fields Agents,
// Environments and TaskSources.
type Fleet struct {
	// Agents maps every agent instance (responses_api_agents) to its base
	// URL "http://host:port".
	Agents map[string]string
	// Environments maps every environment server instance
	// (environment_servers) to what the collector needs of it.
	Environments map[string]EnvironmentServer
	// TaskSources maps every agent and resources server instance to the
	// agent that runs the rows whose task_source names it.
	TaskSources map[string]TaskSource
}

// EnvironmentServer is one environment server of the fleet (NeMo Gym 0.7's
// environment_servers; legacy_agent relays an agent's /run and
// /aggregate_metrics to it).
type EnvironmentServer struct {
	// URL is its base URL, "http://host:port".
	URL string
	// Impl is its implementation, the one key under environment_servers
	// (such as legacy_agent): the _ng_result_type of the lines it
	// produced.
	Impl string
	// Agents are the agents it names (gymconfig.EnvironmentAgents).
	Agents []string
}

// TaskSource is where rows whose task_source names an instance go, as
// upstream resolves it (global_config.py resolve_dataset_agent): the
// dataset's agent pin, else the instance itself when it is an agent,
// else the one agent whose resources_server is that instance.
type TaskSource struct {
	// Agent is the agent; "" when the instance cannot route rows.
	Agent string
	// Err says why the instance cannot route rows ("" when Agent is set).
	Err string
}

// HeadFleet asks the NeMo Gym head server at headURL (such as
// "http://127.0.0.1:11000") for its fleet config, as upstream's own clients
// do (GET PathHeadConfig), and reads the Fleet from it (FleetFromConfig).
//
// client nil means http.DefaultClient; the call is bounded by 30 s unless
// ctx ends sooner. Errors name the head URL and the route.
func HeadFleet(ctx context.Context, client *http.Client, headURL string, lookupEnv func(string) (string, bool)) (Fleet, error) {
	u, err := url.Parse(headURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return Fleet{}, fmt.Errorf("head server URL %q: want http://host:port", headURL)
	}
	base := strings.TrimRight(headURL, "/")
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, headTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+PathHeadConfig, nil)
	if err != nil {
		return Fleet{}, fmt.Errorf("head server %s: %w", base, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the method and URL are said already
		}
		return Fleet{}, fmt.Errorf("head server %s: GET %s: %w", base, PathHeadConfig, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHeadConfigBytes+1))
	if err != nil {
		return Fleet{}, fmt.Errorf("head server %s: GET %s: reading the answer: %w", base, PathHeadConfig, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Fleet{}, fmt.Errorf("head server %s: GET %s answered %s: %s", base, PathHeadConfig, resp.Status, snippet(body))
	}
	if len(body) > maxHeadConfigBytes {
		return Fleet{}, fmt.Errorf("head server %s: GET %s: answer larger than %d bytes", base, PathHeadConfig, maxHeadConfigBytes)
	}
	var doc string
	if err := json.Unmarshal(body, &doc); err != nil {
		return Fleet{}, fmt.Errorf("head server %s: GET %s did not answer a JSON string (NeMo Gym's head API sends the config YAML as one): %v; the answer begins %s",
			base, PathHeadConfig, err, snippet(body))
	}
	f, err := FleetFromConfig([]byte(doc), lookupEnv)
	if err != nil {
		return Fleet{}, fmt.Errorf("head server %s: %w", base, err)
	}
	return f, nil
}

// FleetFromConfig reads the Fleet of a config dict's YAML (as the head
// server serves it, hosts and ports filled in, interpolations
// unresolved).
//
// Only what routing reads is resolved (gymconfig.Lazy), with lookupEnv
// for ${oc.env:...} (os.LookupEnv in production), as upstream's clients
// read only what they use: each agent's and environment server's host and
// port, each environment server's block, and the resources_server and
// datasets of agents and resources servers. A config whose other values
// need variables the collector does not have (an API key of a judge
// model, say) still works; a task_source whose instance cannot be read
// is an error only for the rows that name it.
func FleetFromConfig(doc []byte, lookupEnv func(string) (string, bool)) (Fleet, error) {
	d, err := gymconfig.Parse(doc)
	if err != nil {
		return Fleet{}, fmt.Errorf("config: %w", err)
	}
	z := d.Lazy(lookupEnv)
	instances, err := z.Instances()
	if err != nil {
		return Fleet{}, fmt.Errorf("config: %w", err)
	}
	f := Fleet{Agents: map[string]string{}, Environments: map[string]EnvironmentServer{}, TaskSources: map[string]TaskSource{}}
	// field reads the value at path, resolved; ok is false when the
	// config has nothing there.
	field := func(path ...string) (v any, ok bool, err error) {
		if _, ok := d.Get(path); !ok {
			return nil, false, nil
		}
		v, err = z.Value(path...)
		return v, true, err
	}
	implOf := func(in gymconfig.Ref) string {
		v, _ := d.Get([]string{in.Name, in.Type})
		if m, ok := v.(map[string]any); ok && len(m) == 1 {
			for k := range m {
				return k
			}
		}
		return ""
	}
	// What the agents reference, for task_source: by resources server,
	// the agents naming it, in config order.
	byResources := map[string][]string{}
	for _, in := range instances {
		switch in.Type {
		case contract.ServerTypeAgent:
			u, err := z.URL(in.Name)
			if err != nil {
				return Fleet{}, fmt.Errorf("config: %w", err)
			}
			f.Agents[in.Name] = u
			if v, ok, err := field(in.Name, in.Type, implOf(in), keyResourcesServer, "name"); ok && err == nil {
				if name, isStr := v.(string); isStr {
					byResources[name] = append(byResources[name], in.Name)
				}
			}
		case contract.ServerTypeEnvironment:
			inst, found, err := z.Instance(in.Name)
			if err != nil || !found {
				return Fleet{}, fmt.Errorf("config: environment server %s: %v", in.Name, cmpErr(err, "not an instance"))
			}
			u, err := z.URL(in.Name)
			if err != nil {
				return Fleet{}, fmt.Errorf("config: %w", err)
			}
			f.Environments[in.Name] = EnvironmentServer{URL: u, Impl: inst.Impl, Agents: gymconfig.EnvironmentAgents(inst.Block)}
		}
	}
	for _, in := range instances {
		switch in.Type {
		case contract.ServerTypeAgent, contract.ServerTypeResources:
		default:
			f.TaskSources[in.Name] = TaskSource{Err: "instance is not an agent or resources server (datasets cannot route here)"}
			continue
		}
		pins, err := datasetPins(field, in.Name, in.Type, implOf(in))
		if err != nil {
			f.TaskSources[in.Name] = TaskSource{Err: err.Error()}
			continue
		}
		f.TaskSources[in.Name] = resolveTaskSource(in.Name, in.Type == contract.ServerTypeAgent, pins, byResources[in.Name])
	}
	return f, nil
}

// cmpErr is err's message, or alt when err is nil.
func cmpErr(err error, alt string) string {
	if err != nil {
		return err.Error()
	}
	return alt
}

// datasetPins reads the distinct agent pins of an instance's datasets,
// in declaration order.
func datasetPins(field func(...string) (any, bool, error), name, typ, impl string) ([]string, error) {
	v, ok, err := field(name, typ, impl, keyDatasets)
	if err != nil {
		return nil, fmt.Errorf("its datasets: %w", err)
	}
	list, _ := v.([]any)
	if !ok || list == nil {
		return nil, nil
	}
	var pins []string
	for _, ds := range list {
		m, _ := ds.(map[string]any)
		if pin, isStr := m[keyDatasetAgent].(string); isStr && !slices.Contains(pins, pin) {
			pins = append(pins, pin)
		}
	}
	return pins, nil
}

// resolveTaskSource applies upstream's rules for the rows of an
// instance's datasets: pins are its datasets' agent pins, candidates the
// agents whose resources_server it is.
func resolveTaskSource(name string, isAgent bool, pins, candidates []string) TaskSource {
	if len(pins) > 1 {
		return TaskSource{Err: fmt.Sprintf("its datasets pin conflicting agents (%s), which task_source alone cannot tell apart; pass --agent to pick one",
			strings.Join(pins, ", "))}
	}
	if isAgent {
		if len(pins) == 1 && pins[0] != name {
			return TaskSource{Err: fmt.Sprintf("dataset declared by agent %q pins agent %q, but rows are dispatched to the declaring agent, so the pin would silently not apply", name, pins[0])}
		}
		return TaskSource{Agent: name}
	}
	if len(pins) == 1 {
		if !slices.Contains(candidates, pins[0]) {
			return TaskSource{Err: fmt.Sprintf("the dataset pins agent %q, but no agent of that name references resources server %q (agents referencing it: %s)",
				pins[0], name, listOrNone(candidates))}
		}
		return TaskSource{Agent: pins[0]}
	}
	switch len(candidates) {
	case 0:
		return TaskSource{Err: fmt.Sprintf("no agent in the running config references resources server %q", name)}
	case 1:
		return TaskSource{Agent: candidates[0]}
	}
	sorted := slices.Clone(candidates)
	slices.Sort(sorted)
	return TaskSource{Err: fmt.Sprintf("%d agents reference this resources server (%s); pin one with an agent key on the dataset, or pass --agent",
		len(sorted), strings.Join(sorted, ", "))}
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	s := slices.Clone(names)
	slices.Sort(s)
	return strings.Join(s, ", ")
}

// snippet is the start of an answer body, quoted, for an error message.
func snippet(b []byte) string {
	const n = 120
	if len(b) > n {
		return fmt.Sprintf("%q...", b[:n])
	}
	return fmt.Sprintf("%q", b)
}
