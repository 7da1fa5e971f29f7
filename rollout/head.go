package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/protocol"
)

// PathHeadConfig is the head server's route that answers the fleet's
// config dict: a JSON string holding its YAML, interpolations unresolved.
const PathHeadConfig = "/global_config_dict_yaml"

// headTimeout bounds the head server call when the client has no timeout
// of its own.
const headTimeout = 30 * time.Second

// maxHeadConfigBytes bounds the answer of the head server.
const maxHeadConfigBytes = 64 << 20

// HeadAgents asks the NeMo Gym head server at headURL (such as
// "http://127.0.0.1:11000") for its fleet config, as upstream's own clients
// do (GET PathHeadConfig), and returns the base URL "http://host:port" of
// every agent instance (responses_api_agents) by instance name: the map
// Options.Agents takes.
//
// The config is resolved with lookupEnv for ${oc.env:...} (os.LookupEnv in
// production). Upstream's clients resolve only the host and port they
// read, so a config whose other servers need variables the collector does
// not have (an API key of a judge model, say) still works: when the whole
// config does not resolve, only the agent instances and the scalars and
// reserved keys around them are resolved again, and that error is the one
// reported if it fails too.
//
// client nil means http.DefaultClient; the call is bounded by 30 s unless
// ctx ends sooner. Errors name the head URL and the route.
func HeadAgents(ctx context.Context, client *http.Client, headURL string, lookupEnv func(string) (string, bool)) (map[string]string, error) {
	u, err := url.Parse(headURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("head server URL %q: want http://host:port", headURL)
	}
	base := strings.TrimRight(headURL, "/")
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, headTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+PathHeadConfig, nil)
	if err != nil {
		return nil, fmt.Errorf("head server %s: %w", base, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the method and URL are said already
		}
		return nil, fmt.Errorf("head server %s: GET %s: %w", base, PathHeadConfig, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHeadConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("head server %s: GET %s: reading the answer: %w", base, PathHeadConfig, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("head server %s: GET %s answered %s: %s", base, PathHeadConfig, resp.Status, snippet(body))
	}
	if len(body) > maxHeadConfigBytes {
		return nil, fmt.Errorf("head server %s: GET %s: answer larger than %d bytes", base, PathHeadConfig, maxHeadConfigBytes)
	}
	var doc string
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("head server %s: GET %s did not answer a JSON string (NeMo Gym's head API sends the config YAML as one): %v; the answer begins %s",
			base, PathHeadConfig, err, snippet(body))
	}
	cfg, err := resolveForAgents([]byte(doc), lookupEnv)
	if err != nil {
		return nil, fmt.Errorf("head server %s: config: %w", base, err)
	}
	agents := map[string]string{}
	for _, inst := range cfg.Instances {
		if inst.Type != protocol.ServerTypeAgent {
			continue
		}
		u, err := cfg.URL(inst.Name)
		if err != nil {
			return nil, fmt.Errorf("head server %s: config: %w", base, err)
		}
		agents[inst.Name] = u
	}
	return agents, nil
}

// resolveForAgents parses and resolves a config dict; when the whole dict
// does not resolve, it resolves it again without the model and resources
// server instances.
func resolveForAgents(doc []byte, lookupEnv func(string) (string, bool)) (*gymconfig.Config, error) {
	d, err := gymconfig.Parse(doc)
	if err != nil {
		return nil, err
	}
	cfg, err := d.Resolve(lookupEnv)
	if err == nil {
		return cfg, nil
	}
	var top yaml.Node
	if yaml.Unmarshal(doc, &top) != nil || len(top.Content) != 1 || top.Content[0].Kind != yaml.MappingNode {
		return nil, err
	}
	m := top.Content[0]
	dropped := false
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if gymconfig.IsReserved(k.Value) || v.Kind != yaml.MappingNode || len(v.Content) != 2 {
			continue
		}
		if t := v.Content[0].Value; t == protocol.ServerTypeResources || t == protocol.ServerTypeModel {
			d.Delete([]string{k.Value})
			dropped = true
		}
	}
	if !dropped {
		return nil, err
	}
	return d.Resolve(lookupEnv)
}

// snippet is the start of an answer body, quoted, for an error message.
func snippet(b []byte) string {
	const n = 120
	if len(b) > n {
		return fmt.Sprintf("%q...", b[:n])
	}
	return fmt.Sprintf("%q", b)
}
