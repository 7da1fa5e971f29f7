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

// HeadAgents asks the NeMo Gym head server at headURL (such as
// "http://127.0.0.1:11000") for its fleet config, as upstream's own clients
// do (GET PathHeadConfig), and returns the base URL "http://host:port" of
// every agent instance (responses_api_agents) by instance name: the map
// Options.Agents takes.
//
// Only each agent's host and port are resolved (gymconfig.Lazy), with
// lookupEnv for ${oc.env:...} (os.LookupEnv in production), as upstream's
// clients read only the host and port of a server: a config whose other
// values need variables the collector does not have (an API key of a
// judge model, say) still works. Agents are found from the config's
// unresolved shape (gymconfig.Lazy.Instances).
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
	d, err := gymconfig.Parse([]byte(doc))
	if err != nil {
		return nil, fmt.Errorf("head server %s: config: %w", base, err)
	}
	fleet := d.Lazy(lookupEnv)
	instances, err := fleet.Instances()
	if err != nil {
		return nil, fmt.Errorf("head server %s: config: %w", base, err)
	}
	agents := map[string]string{}
	for _, inst := range instances {
		if inst.Type != contract.ServerTypeAgent {
			continue
		}
		u, err := fleet.URL(inst.Name)
		if err != nil {
			return nil, fmt.Errorf("head server %s: config: %w", base, err)
		}
		agents[inst.Name] = u
	}
	return agents, nil
}

// snippet is the start of an answer body, quoted, for an error message.
func snippet(b []byte) string {
	const n = 120
	if len(b) > n {
		return fmt.Sprintf("%q...", b[:n])
	}
	return fmt.Sprintf("%q", b)
}
