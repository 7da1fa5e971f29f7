package interop

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/internal/upstream"
)

// jaegerBinVar names the Jaeger binary the trace test runs
// (scripts/interop-upstream.sh builds tools/bin/jaeger and sets it).
const jaegerBinVar = "GYMLENS_JAEGER_BIN"

// A span of Jaeger's query API (GET /api/traces), the fields read here.
type jaegerSpan struct {
	SpanID     string `json:"spanID"`
	Operation  string `json:"operationName"`
	ProcessID  string `json:"processID"`
	References []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []jaegerTag `json:"tags"`
}

type jaegerTag struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

type jaegerTrace struct {
	TraceID   string       `json:"traceID"`
	Spans     []jaegerSpan `json:"spans"`
	Processes map[string]struct {
		ServiceName string      `json:"serviceName"`
		Tags        []jaegerTag `json:"tags"`
	} `json:"processes"`
}

func tagOf(tags []jaegerTag, key string) string {
	for _, t := range tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// TestUpstreamOneTraceAcrossLanguages is issue 34's trace check: one
// `gymlens run` fleet of two languages exporting OTLP to one real Jaeger,
// configured by nothing but the NEMO_GYM_OTEL_* / OTEL_* variables the
// orchestrator was given. Go: the orchestrator's collector, the generated
// legacy_agent relay and the policy model. Python: nemo-gym 0.6.0's
// simple_agent and string_match, each with 0.6.0's telemetry functions
// called where 0.7.0 calls them (scripts/upstream/gym06_telemetry.py: the
// FastAPI instrumentation, gym.rollout, and traceparent injection on
// every request the agent sends). Every rollout must be one trace in
// Jaeger holding all five services, with CLIENT -> SERVER parentage Go ->
// Python (relay -> agent), Python -> Go (agent -> model) and Python ->
// Python (agent -> resources), every service named nemo-gym/<server> in
// both languages, and one rollout id on the spans of both: the
// collector's, upstream's gym.rollout span's and the Go model's (which
// reads it from the /ng-rollout/<id>/ prefix upstream's agent adds).
func TestUpstreamOneTraceAcrossLanguages(t *testing.T) {
	py := upstream.TelemetryPython(t)
	jaeger := os.Getenv(jaegerBinVar)
	if jaeger == "" {
		t.Skipf("$%s is not set: scripts/interop-upstream.sh builds Jaeger and runs this test", jaegerBinVar)
	}
	root, err := upstream.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	grpcPort, httpPort, queryPort, queryGRPC := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	jcmd := exec.Command(jaeger, "--config", filepath.Join(root, "tools", "jaeger", "config.yaml"))
	jcmd.Env = append(os.Environ(),
		fmt.Sprintf("JAEGER_OTLP_GRPC=127.0.0.1:%d", grpcPort), fmt.Sprintf("JAEGER_OTLP_HTTP=127.0.0.1:%d", httpPort),
		fmt.Sprintf("JAEGER_QUERY_HTTP=127.0.0.1:%d", queryPort), fmt.Sprintf("JAEGER_QUERY_GRPC=127.0.0.1:%d", queryGRPC))
	jproc := testenv.Start(t, jcmd, time.Minute)
	query := fmt.Sprintf("http://127.0.0.1:%d", queryPort)
	jproc.WaitHTTP(t, query+"/api/services")
	jproc.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/", httpPort))

	rows := dataset.WithAgent(dataset.StringMatch(5, 43), "sm_agent")
	tasks := writeTasks(t, dir, rows)
	wrapper := filepath.Join(root, "scripts", "upstream", "gym06_telemetry.py")
	// observability_enabled: upstream's agent then names each rollout on
	// its spans and in the /ng-rollout/<id>/ paths it calls.
	fleet := fmt.Sprintf(`observability_enabled: true
policy_model:
  responses_api_models:
    policy_model: {correct_probability: 0.6, seed: 7}
string_match:
  resources_servers:
    string_match:
      entrypoint: app.py
      domain: knowledge
      command: [%[1]s, %[2]s, resources_servers/string_match]
sm_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      resources_server: {type: resources_servers, name: string_match}
      model_server: {type: responses_api_models, name: policy_model}
      command: [%[1]s, %[2]s, responses_api_agents/simple_agent]
`, py, wrapper)
	lines, _ := goFleetRunWith(t, filepath.Join(dir, "run"), fleet, tasks, []string{
		"NEMO_GYM_OTEL_ENABLED=1", "NEMO_GYM_OTEL_EXPORTER=otlp",
		fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", grpcPort), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
	})
	if len(lines) != 2*len(rows) {
		t.Fatalf("%d rollouts in rollouts.jsonl, want %d", len(lines), 2*len(rows))
	}

	const (
		orch, relay, agent, model, res = "orchestrator", "sm_environment_server", "sm_agent", "policy_model", "string_match"
	)
	lang := map[string]string{orch: "go", relay: "go", model: "go", agent: "python", res: "python"}
	service := func(name string) string { return "nemo-gym/" + name }

	// The rollout traces, by the rollout id the collector put on its span;
	// polled until every rollout's trace holds all five services (Python's
	// batch processor exports on its own schedule, by shutdown at the
	// latest).
	var traces map[string]jaegerTrace
	deadline := time.Now().Add(90 * time.Second)
	for {
		traces = map[string]jaegerTrace{}
		var all []jaegerTrace
		err := jaegerGet(query, "/api/traces?"+url.Values{"service": {service(orch)}, "limit": {"1000"}, "lookback": {"1h"}}.Encode(), &all)
		complete := 0
		for _, tr := range all {
			id, services := "", map[string]bool{}
			for _, s := range tr.Spans {
				svc := strings.TrimPrefix(tr.Processes[s.ProcessID].ServiceName, "nemo-gym/")
				services[svc] = true
				if svc == orch && tagOf(s.Tags, "span.kind") == "client" && tagOf(s.Tags, contract.AttrRolloutID) != "" {
					id = tagOf(s.Tags, contract.AttrRolloutID)
				}
			}
			if id == "" {
				continue // the job's own trace (gym.job, /aggregate_metrics)
			}
			traces[id] = tr
			if len(services) == len(lang) {
				complete++
			}
		}
		if err == nil && complete == len(lines) {
			break
		}
		if time.Now().After(deadline) {
			t.Logf("after 90 s: %d rollout traces, %d with all five services (last error: %v)", len(traces), complete, err)
			break
		}
		time.Sleep(time.Second)
	}

	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range lines {
			if !yield(id) {
				return
			}
		}
	})
	edges := [][2]string{{orch, relay}, {relay, agent}, {agent, model}, {agent, res}}
	for _, id := range ids {
		tr, ok := traces[id]
		if !ok {
			t.Errorf("rollout %s: no trace in Jaeger", id)
			continue
		}
		byID := map[string]jaegerSpan{}
		for _, s := range tr.Spans {
			byID[s.SpanID] = s
		}
		name := func(s jaegerSpan) string {
			return strings.TrimPrefix(tr.Processes[s.ProcessID].ServiceName, "nemo-gym/")
		}
		seen := map[string]bool{}
		found := map[[2]string]bool{}
		modelIDs, rolloutSpanIDs := []string{}, []string{}
		for _, s := range tr.Spans {
			p := tr.Processes[s.ProcessID]
			svc := name(s)
			if !strings.HasPrefix(p.ServiceName, "nemo-gym/") {
				t.Errorf("rollout %s: service %q, want nemo-gym/<server> in both languages", id, p.ServiceName)
			}
			if want, ok := lang[svc]; !ok {
				t.Errorf("rollout %s: span %q of unexpected service %q", id, s.Operation, p.ServiceName)
			} else if got := tagOf(p.Tags, "telemetry.sdk.language"); got != want {
				t.Errorf("rollout %s: service %s exports with telemetry.sdk.language %q, want %q", id, svc, got, want)
			}
			seen[svc] = true
			if svc == model && tagOf(s.Tags, "span.kind") == "server" {
				modelIDs = append(modelIDs, tagOf(s.Tags, contract.AttrRolloutID))
			}
			if svc == agent && s.Operation == "gym.rollout" {
				rolloutSpanIDs = append(rolloutSpanIDs, tagOf(s.Tags, contract.AttrRolloutID))
			}
			if tagOf(s.Tags, "span.kind") != "server" {
				continue
			}
			for _, r := range s.References {
				if parent, ok := byID[r.SpanID]; ok && r.RefType == "CHILD_OF" && tagOf(parent.Tags, "span.kind") == "client" {
					found[[2]string{name(parent), svc}] = true
				}
			}
		}
		for svc := range lang {
			if !seen[svc] {
				t.Errorf("rollout %s: trace %s has no span of %s (%s)", id, tr.TraceID, svc, lang[svc])
			}
		}
		for _, e := range edges {
			if !found[e] {
				t.Errorf("rollout %s: no %s CLIENT span parenting a %s SERVER span (%s -> %s)", id, e[0], e[1], lang[e[0]], lang[e[1]])
			}
		}
		if len(rolloutSpanIDs) != 1 || rolloutSpanIDs[0] != id {
			t.Errorf("rollout %s: upstream's gym.rollout spans name rollouts %q, want exactly [%s]", id, rolloutSpanIDs, id)
		}
		if len(modelIDs) == 0 || slices.ContainsFunc(modelIDs, func(m string) bool { return m != id }) {
			t.Errorf("rollout %s: the Go model's SERVER spans name rollouts %q, want %s on each", id, modelIDs, id)
		}
	}
	if !t.Failed() {
		t.Logf("%d rollouts, each one trace in Jaeger across Go (%s, %s, %s) and Python (%s, %s): CLIENT->SERVER edges %v, one rollout id on both sides",
			len(ids), orch, relay, model, agent, res, edges)
	}
}

// jaegerGet decodes the data member of a Jaeger query API answer.
func jaegerGet(base, path string, v any) error {
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Get(base + path)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, res.Status)
	}
	var answer struct{ Data json.RawMessage }
	if err := json.NewDecoder(res.Body).Decode(&answer); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return json.Unmarshal(answer.Data, v)
}
