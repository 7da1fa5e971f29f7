// Command e2echeck verifies, through Jaeger's HTTP query API, what one
// `gymlens run` exported over OTLP. It is the assertion half of scripts/e2e.sh
// and uses the standard library only.
//
// Given the run directory (runs/<run id>/) and the query address, it waits
// (bounded) until Jaeger knows the fleet's services and holds a complete
// trace for every rollout in rollouts.jsonl, then checks:
//
//   - the orchestrator, environment server, agent, model and resources
//     services exist;
//   - every rollout has exactly one trace, the one rollouts.jsonl names, and
//     it holds spans from the orchestrator, agent, model and resources
//     processes;
//   - every hop between processes is a CLIENT span whose CHILD_OF child in
//     the next process is a SERVER span, and each rollout has the
//     orchestrator->environment server, environment server->agent,
//     agent->model and agent->resources hops (NeMo Gym 0.7's collector
//     reaches the agent through the relay in front of it; with -environment
//     "" the orchestrator calls the agent itself);
//   - every span of a rollout's trace, in every process, carries
//     nemo.gym.rollout.id with the rollout's upstream id, and the agent's
//     calls (CLIENT spans) were sent under /ng-rollout/<id>/;
//   - span kinds agree with that shape (gym.* spans are internal);
//   - no attribute under a sensitive key (prompt, text, token, key, ...) has
//     a value other than "[REDACTED]", no URL-like value has a query string,
//     and no value quotes a task question (the prompt) or a model answer.
//
// It prints one line per check with its figure and exits 1 when any check
// fails, 2 on bad usage.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Jaeger's query API (the one its UI uses) answers with this envelope.
type apiResponse[T any] struct {
	Data   T           `json:"data"`
	Errors []apiErrMsg `json:"errors"`
}

type apiErrMsg struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
}

type jTrace struct {
	TraceID   string              `json:"traceID"`
	Spans     []jSpan             `json:"spans"`
	Processes map[string]jProcess `json:"processes"`
}

type jSpan struct {
	TraceID       string   `json:"traceID"`
	SpanID        string   `json:"spanID"`
	OperationName string   `json:"operationName"`
	References    []jRef   `json:"references"`
	Tags          []jKV    `json:"tags"`
	Logs          []jLog   `json:"logs"`
	ProcessID     string   `json:"processID"`
	Warnings      []string `json:"warnings"`
}

type jRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type jKV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

type jLog struct {
	Fields []jKV `json:"fields"`
}

type jProcess struct {
	ServiceName string `json:"serviceName"`
	Tags        []jKV  `json:"tags"`
}

// rolloutRecord is the part of a rollouts.jsonl line (NeMo Gym's output
// line plus gym's _gymlens bookkeeping) or of a _failures.jsonl line the
// checks use.
type rolloutRecord struct {
	RolloutID string
	Answer    string
	Error     string
	TraceID   string
}

// UnmarshalJSON reads an output or failure line.
func (r *rolloutRecord) UnmarshalJSON(b []byte) error {
	var line struct {
		Gym struct {
			RolloutID string `json:"rollout_id"`
			TraceID   string `json:"trace_id"`
		} `json:"_gymlens"`
		FailureError string `json:"_ng_failure_message"`
		Response     struct {
			Output []struct {
				Type    string `json:"type"`
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		} `json:"response"`
	}
	if err := json.Unmarshal(b, &line); err != nil {
		return err
	}
	var answer strings.Builder
	for _, it := range line.Response.Output {
		if it.Type != "message" {
			continue
		}
		for _, c := range it.Content {
			if c.Type == "output_text" {
				answer.WriteString(c.Text)
			}
		}
	}
	*r = rolloutRecord{RolloutID: line.Gym.RolloutID, TraceID: line.Gym.TraceID, Error: line.FailureError, Answer: answer.String()}
	return nil
}

// taskRecord is a dataset row of tasks.jsonl, by its prompt.
type taskRecord struct {
	Question string
}

// UnmarshalJSON reads the last user message of the row's input (or the
// input string).
func (t *taskRecord) UnmarshalJSON(b []byte) error {
	var row struct {
		Params struct {
			Input json.RawMessage `json:"input"`
		} `json:"responses_create_params"`
	}
	if err := json.Unmarshal(b, &row); err != nil {
		return err
	}
	var text string
	if json.Unmarshal(row.Params.Input, &text) == nil {
		t.Question = text
		return nil
	}
	var items []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(row.Params.Input, &items); err != nil {
		return err
	}
	for _, it := range items {
		var c string
		if it.Role == "user" && json.Unmarshal(it.Content, &c) == nil {
			t.Question = c
		}
	}
	return nil
}

const (
	attrRolloutID = "nemo.gym.rollout.id"
	attrRunID     = "nemo.run.id"
	redacted      = "[REDACTED]"
)

type config struct {
	query    string
	runDir   string
	label    string
	prefix   string
	orch     string
	env      string // the environment server in front of the agent, or ""
	agent    string
	model    string
	res      string
	wait     time.Duration
	minSpans int
}

// procs are the fleet's processes every rollout's trace has spans from.
func (c config) procs() []string {
	if c.env == "" {
		return []string{c.orch, c.agent, c.model, c.res}
	}
	return []string{c.orch, c.env, c.agent, c.model, c.res}
}

// callers maps each process of a rollout to the one that calls it.
func (c config) callers() map[string]string {
	if c.env == "" {
		return map[string]string{c.agent: c.orch, c.model: c.agent, c.res: c.agent}
	}
	return map[string]string{c.env: c.orch, c.agent: c.env, c.model: c.agent, c.res: c.agent}
}

func main() {
	var c config
	flag.StringVar(&c.query, "query", "http://127.0.0.1:16686", "base URL of Jaeger's query HTTP API")
	flag.StringVar(&c.runDir, "run-dir", "", "the run directory gymlens run wrote (runs/<run id>); required")
	flag.StringVar(&c.label, "label", "", "label printed after every figure, e.g. the OTLP protocol")
	flag.StringVar(&c.prefix, "service-prefix", "nemo-gym/", "prefix of every service name")
	flag.StringVar(&c.orch, "orchestrator", "orchestrator", "orchestrator server name")
	flag.StringVar(&c.env, "environment", "simple_agent_environment_server", "environment server in front of the agent (\"\": none, the orchestrator calls the agent)")
	flag.StringVar(&c.agent, "agent", "simple_agent", "agent server name")
	flag.StringVar(&c.model, "model", "policy_model", "model server name")
	flag.StringVar(&c.res, "resources", "arithmetic", "resources server name")
	flag.DurationVar(&c.wait, "wait", 60*time.Second, "how long to wait for services and complete traces")
	freePorts := flag.Int("free-ports", 0, "print this many free loopback TCP ports, one a line, and exit")
	flag.Parse()
	if *freePorts > 0 {
		if err := printFreePorts(os.Stdout, *freePorts); err != nil {
			fmt.Fprintln(os.Stderr, "e2echeck:", err)
			os.Exit(1)
		}
		return
	}
	if c.runDir == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: e2echeck -run-dir runs/<run id> [-query URL] [-label TEXT]")
		os.Exit(2)
	}
	ok, err := run(c, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stdout, "FAIL %v%s\n", err, c.suffix())
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

func (c config) suffix() string {
	if c.label == "" {
		return ""
	}
	return " (" + c.label + ")"
}

func (c config) svc(name string) string { return c.prefix + name }

// reporter prints check lines and remembers whether any failed.
type reporter struct {
	w      io.Writer
	suffix string
	failed bool
}

func (r *reporter) check(pass bool, format string, args ...any) {
	tag := "ok  "
	if !pass {
		tag = "FAIL "
		r.failed = true
	}
	fmt.Fprintf(r.w, "%s%s%s\n", tag, fmt.Sprintf(format, args...), r.suffix)
}

// detail prints an indented explanation under a failed check (at most a few).
func (r *reporter) detail(lines []string) {
	const max = 5
	for i, l := range lines {
		if i == max {
			fmt.Fprintf(r.w, "       ... and %d more\n", len(lines)-max)
			break
		}
		fmt.Fprintf(r.w, "       %s\n", l)
	}
}

func run(c config, w io.Writer) (bool, error) {
	rollouts, err := readJSONL[rolloutRecord](filepath.Join(c.runDir, "rollouts.jsonl"))
	if err != nil {
		return false, err
	}
	// Rollouts that failed every attempt are in the failures sidecar.
	if failed, err := readJSONL[rolloutRecord](filepath.Join(c.runDir, "rollouts_failures.jsonl")); err == nil {
		rollouts = append(rollouts, failed...)
	}
	tasks, err := readJSONL[taskRecord](filepath.Join(c.runDir, "tasks.jsonl"))
	if err != nil {
		return false, err
	}
	runID := filepath.Base(filepath.Clean(c.runDir))
	api := &client{base: strings.TrimRight(c.query, "/"), http: &http.Client{Timeout: 10 * time.Second}}
	rep := &reporter{w: w, suffix: c.suffix()}
	deadline := time.Now().Add(c.wait)

	// Rollouts on record.
	failedRollouts := 0
	for _, r := range rollouts {
		if r.Error != "" || r.RolloutID == "" {
			failedRollouts++
		}
	}
	rep.check(len(rollouts) > 0 && failedRollouts == 0, "rollouts recorded by gymlens run: %d (%d failed), run %s", len(rollouts), failedRollouts, runID)

	// Services.
	var want []string
	for _, p := range c.procs() {
		want = append(want, c.svc(p))
	}
	var services []string
	for {
		services, err = api.services()
		if err == nil && len(missing(want, services)) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		return false, fmt.Errorf("services: %w", err)
	}
	miss := missing(want, services)
	rep.check(len(miss) == 0, "services: %d of %d (%s)", len(want)-len(miss), len(want), strings.Join(want, ", "))
	if len(miss) > 0 {
		rep.detail([]string{"missing: " + strings.Join(miss, ", "), "Jaeger has: " + strings.Join(services, ", ")})
	}

	// Traces: poll until every rollout's trace is complete or time is up.
	limit := 4*len(rollouts) + 50
	var traces map[string]*jTrace
	var results []rolloutResult
	for {
		traces, err = api.runTraces(want, limit, runID)
		if err != nil && time.Now().After(deadline) {
			return false, fmt.Errorf("traces: %w", err)
		}
		if err == nil {
			results = judgeRollouts(c, rollouts, traces)
			if allComplete(results) {
				break
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}

	// One trace per rollout, the one the agent reported.
	var notOne, idMismatch, incomplete, hopBad []string
	hops := map[string]int{}
	hopTotal := 0
	for _, r := range results {
		if r.traces != 1 {
			notOne = append(notOne, fmt.Sprintf("rollout %s: %d traces", r.id, r.traces))
			continue
		}
		if r.want != "" && r.want != r.trace {
			idMismatch = append(idMismatch, fmt.Sprintf("rollout %s: rollouts.jsonl says %s, Jaeger has it in %s", r.id, r.want, r.trace))
		}
		if len(r.missingProcs) > 0 {
			incomplete = append(incomplete, fmt.Sprintf("rollout %s (trace %s): no spans from %s", r.id, r.trace, strings.Join(r.missingProcs, ", ")))
		}
		for _, h := range r.hops {
			hops[h]++
		}
		hopTotal += len(r.hops)
		hopBad = append(hopBad, r.hopProblems...)
	}
	n := len(rollouts)
	rep.check(len(notOne) == 0, "rollouts with exactly one trace in Jaeger: %d/%d", n-len(notOne), n)
	rep.detail(notOne)
	rep.check(len(notOne)+len(idMismatch) == 0, "trace ids matching rollouts.jsonl: %d/%d", n-len(notOne)-len(idMismatch), n)
	rep.detail(idMismatch)
	rep.check(len(notOne)+len(incomplete) == 0, "rollouts with a complete trace (orchestrator, agent, model, resources spans): %d/%d", n-len(notOne)-len(incomplete), n)
	rep.detail(incomplete)
	var pairs []string
	for callee, caller := range c.callers() {
		pairs = append(pairs, caller+"->"+callee)
	}
	slices.Sort(pairs)
	var hopFig []string
	for _, p := range pairs {
		hopFig = append(hopFig, fmt.Sprintf("%s %d", p, hops[p]))
	}
	rep.check(len(notOne) == 0 && len(hopBad) == 0 && hopTotal == len(pairs)*n,
		"CLIENT->SERVER hops with CHILD_OF parentage: %d/%d (%s)", hopTotal, len(pairs)*n, strings.Join(hopFig, ", "))
	rep.detail(hopBad)

	// The upstream rollout id on every span of every process, and in the
	// path of the agent's calls.
	ids := judgeRolloutIDs(c, rollouts, traces)
	var procFig []string
	for _, p := range c.procs() {
		procFig = append(procFig, fmt.Sprintf("%s %d/%d", p, ids.withID[p], ids.spans[p]))
	}
	rep.check(len(notOne) == 0 && ids.total > 0 && len(ids.idProblems) == 0,
		"spans carrying their rollout's %s: %d/%d (%s)", attrRolloutID, ids.total-len(ids.idProblems), ids.total, strings.Join(procFig, ", "))
	rep.detail(ids.idProblems)
	rep.check(len(notOne) == 0 && ids.calls > 0 && len(ids.pathProblems) == 0,
		"agent CLIENT spans whose url.full has /ng-rollout/<id>/: %d/%d", ids.calls-len(ids.pathProblems), ids.calls)
	rep.detail(ids.pathProblems)

	// Span kinds, over every span of the run (the job trace too).
	kinds, kindBad, spans := judgeKinds(traces)
	rep.check(spans > 0 && len(kindBad) == 0, "span kinds right: %d/%d spans (server %d, client %d, internal %d)",
		spans-len(kindBad), spans, kinds["server"], kinds["client"], kinds["internal"])
	rep.detail(kindBad)

	// Nothing sensitive anywhere: span tags, event fields, process tags.
	p := newPrivacy(tasks, rollouts)
	for _, t := range sortedTraces(traces) {
		for _, s := range t.Spans {
			where := fmt.Sprintf("span %s %q", s.SpanID, s.OperationName)
			p.scan(where, s.Tags)
			for _, l := range s.Logs {
				p.scan(where+" event", l.Fields)
			}
		}
		for _, proc := range t.Processes {
			p.scan("process "+proc.ServiceName, proc.Tags)
		}
	}
	rep.check(len(p.keyHits) == 0, "unredacted values under sensitive keys: %d (%d attributes checked, %d redacted)", len(p.keyHits), p.attrs, p.redacted)
	rep.detail(p.keyHits)
	rep.check(len(p.queryHits) == 0, "URL values with a query string: %d of %d URL values", len(p.queryHits), p.urls)
	rep.detail(p.queryHits)
	rep.check(len(p.promptHits) == 0, "values quoting a prompt or a model answer: %d (%d questions, %d answers looked for)", len(p.promptHits), len(p.prompts), len(p.answers))
	rep.detail(p.promptHits)
	return !rep.failed, nil
}

// printFreePorts asks the kernel for n distinct free loopback ports. They
// are released before the caller binds them, so another process could take
// one in between; on a test machine that is rare enough.
func printFreePorts(w io.Writer, n int) error {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		lns = append(lns, ln)
		fmt.Fprintln(w, ln.Addr().(*net.TCPAddr).Port)
	}
	return nil
}

// client talks to Jaeger's query HTTP API.
type client struct {
	base string
	http *http.Client
}

func (c *client) get(path string, q url.Values, out any) error {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	res, err := c.http.Get(u)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 256<<20))
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %.200s", path, res.Status, body)
	}
	return json.Unmarshal(body, out)
}

func (c *client) services() ([]string, error) {
	var r apiResponse[[]string]
	if err := c.get("/api/services", nil, &r); err != nil {
		return nil, err
	}
	if len(r.Errors) > 0 {
		return nil, fmt.Errorf("/api/services: %s", r.Errors[0].Msg)
	}
	sort.Strings(r.Data)
	return r.Data, nil
}

// runTraces searches every service's traces and keeps the ones that have at
// least one span from a process of this run (resource attribute
// nemo.run.id), keyed by trace id.
func (c *client) runTraces(services []string, limit int, runID string) (map[string]*jTrace, error) {
	out := map[string]*jTrace{}
	for _, svc := range services {
		q := url.Values{"service": {svc}, "limit": {fmt.Sprint(limit)}}
		var r apiResponse[[]jTrace]
		if err := c.get("/api/traces", q, &r); err != nil {
			return nil, err
		}
		if len(r.Errors) > 0 {
			return nil, fmt.Errorf("/api/traces?service=%s: %s", svc, r.Errors[0].Msg)
		}
		for i := range r.Data {
			t := &r.Data[i]
			if !ofRun(t, runID) {
				continue
			}
			if old, ok := out[t.TraceID]; !ok || len(t.Spans) > len(old.Spans) {
				out[t.TraceID] = t
			}
		}
	}
	return out, nil
}

func ofRun(t *jTrace, runID string) bool {
	for _, p := range t.Processes {
		for _, kv := range p.Tags {
			if kv.Key == attrRunID && fmt.Sprint(kv.Value) == runID {
				return true
			}
		}
	}
	return false
}

// rolloutResult is what Jaeger holds for one rollout.
type rolloutResult struct {
	id, want, trace string
	traces          int
	missingProcs    []string
	hops            []string // "caller->callee" per good hop
	hopProblems     []string
}

func allComplete(rs []rolloutResult) bool {
	for _, r := range rs {
		if r.traces != 1 || len(r.missingProcs) > 0 || len(r.hopProblems) > 0 || len(r.hops) < 3 {
			return false
		}
	}
	return true
}

// judgeRollouts finds each rollout's trace by the rollout id attribute and
// checks its processes and cross-process hops.
func judgeRollouts(c config, rollouts []rolloutRecord, traces map[string]*jTrace) []rolloutResult {
	byRollout := map[string][]*jTrace{}
	for _, t := range sortedTraces(traces) {
		seen := map[string]bool{}
		for _, s := range t.Spans {
			if id, ok := tag(s.Tags, attrRolloutID); ok && !seen[id] {
				seen[id] = true
				byRollout[id] = append(byRollout[id], t)
			}
		}
	}
	name := func(t *jTrace, s *jSpan) string {
		return strings.TrimPrefix(t.Processes[s.ProcessID].ServiceName, c.prefix)
	}
	out := make([]rolloutResult, 0, len(rollouts))
	for _, r := range rollouts {
		res := rolloutResult{id: r.RolloutID, want: r.TraceID, traces: len(byRollout[r.RolloutID])}
		if res.traces != 1 {
			out = append(out, res)
			continue
		}
		t := byRollout[r.RolloutID][0]
		res.trace = t.TraceID
		procs := map[string]bool{}
		byID := map[string]*jSpan{}
		for i := range t.Spans {
			s := &t.Spans[i]
			byID[s.SpanID] = s
			procs[name(t, s)] = true
		}
		for _, p := range c.procs() {
			if !procs[p] {
				res.missingProcs = append(res.missingProcs, p)
			}
		}
		callers := c.callers()
		seenHop := map[string]bool{}
		for i := range t.Spans {
			s := &t.Spans[i]
			callee := name(t, s)
			kind := spanKind(s)
			par, ok := parentOf(s)
			parent := byID[par]
			if !ok || parent == nil {
				if kind == "server" {
					res.hopProblems = append(res.hopProblems, fmt.Sprintf("rollout %s: server span %q in %s has no CHILD_OF parent in the trace", r.RolloutID, s.OperationName, callee))
				}
				continue
			}
			caller := name(t, parent)
			if caller == callee {
				if kind == "server" {
					res.hopProblems = append(res.hopProblems, fmt.Sprintf("rollout %s: server span %q in %s has a parent in its own process", r.RolloutID, s.OperationName, callee))
				}
				continue
			}
			hop := caller + "->" + callee
			switch {
			case kind != "server" || spanKind(parent) != "client":
				res.hopProblems = append(res.hopProblems, fmt.Sprintf("rollout %s: hop %s is %s->%s (%q -> %q), want client->server",
					r.RolloutID, hop, orNone(spanKind(parent)), orNone(kind), parent.OperationName, s.OperationName))
			case callers[callee] != caller:
				res.hopProblems = append(res.hopProblems, fmt.Sprintf("rollout %s: unexpected hop %s", r.RolloutID, hop))
			case seenHop[hop+" "+s.OperationName]:
				// One call per route: the agent calls the resources
				// server twice (seed_session, verify), each once.
				res.hopProblems = append(res.hopProblems, fmt.Sprintf("rollout %s: hop %s (%s) happens more than once", r.RolloutID, hop, s.OperationName))
			default:
				seenHop[hop+" "+s.OperationName] = true
				if !seenHop[hop] {
					seenHop[hop] = true
					res.hops = append(res.hops, hop)
				}
			}
		}
		out = append(out, res)
	}
	return out
}

// rolloutIDs is what judgeRolloutIDs found.
type rolloutIDs struct {
	total        int            // spans in the rollouts' traces
	spans        map[string]int // by process
	withID       map[string]int // by process: spans carrying the right id
	idProblems   []string
	calls        int // the agent's CLIENT spans to the model and resources servers
	pathProblems []string
}

// judgeRolloutIDs checks, in the one trace of each rollout, that every
// span carries nemo.gym.rollout.id with the rollout's id (rollouts.jsonl
// names it as upstream derives it: _ng_rollout_id, else "<task>-<rollout>",
// "-a<n>" on a retry), and that every CLIENT span of the agent's (its calls
// to the model and resources servers) was sent under /ng-rollout/<id>/.
// The orchestrator's /run is not prefixed, as upstream's is not.
func judgeRolloutIDs(c config, rollouts []rolloutRecord, traces map[string]*jTrace) rolloutIDs {
	out := rolloutIDs{spans: map[string]int{}, withID: map[string]int{}}
	byRollout := map[string][]*jTrace{}
	for _, t := range sortedTraces(traces) {
		seen := map[string]bool{}
		for _, s := range t.Spans {
			if id, ok := tag(s.Tags, attrRolloutID); ok && !seen[id] {
				seen[id] = true
				byRollout[id] = append(byRollout[id], t)
			}
		}
	}
	for _, r := range rollouts {
		if r.RolloutID == "" || len(byRollout[r.RolloutID]) != 1 {
			continue // judged by the one-trace check
		}
		t := byRollout[r.RolloutID][0]
		for i := range t.Spans {
			s := &t.Spans[i]
			proc := strings.TrimPrefix(t.Processes[s.ProcessID].ServiceName, c.prefix)
			out.total++
			out.spans[proc]++
			if id, _ := tag(s.Tags, attrRolloutID); id == r.RolloutID {
				out.withID[proc]++
			} else {
				out.idProblems = append(out.idProblems, fmt.Sprintf("rollout %s: span %q (%s) in %s has %s %q",
					r.RolloutID, s.OperationName, spanKind(s), proc, attrRolloutID, id))
			}
			if proc != c.agent || spanKind(s) != "client" {
				continue
			}
			out.calls++
			full, _ := tag(s.Tags, "url.full")
			if !strings.Contains(full, "/ng-rollout/"+r.RolloutID+"/") {
				out.pathProblems = append(out.pathProblems, fmt.Sprintf("rollout %s: CLIENT span %q url.full %q", r.RolloutID, s.OperationName, full))
			}
		}
	}
	return out
}

// judgeKinds checks every span's kind against the trace's shape: a span
// whose parent is in another process is a server span; a client span has a
// server child in another process; gym.* spans and spans with a parent in
// their own process that is not a client are internal.
func judgeKinds(traces map[string]*jTrace) (map[string]int, []string, int) {
	count := map[string]int{}
	var bad []string
	n := 0
	for _, t := range sortedTraces(traces) {
		byID := map[string]*jSpan{}
		remoteChildren := map[string][]*jSpan{}
		for i := range t.Spans {
			byID[t.Spans[i].SpanID] = &t.Spans[i]
		}
		proc := func(s *jSpan) string { return t.Processes[s.ProcessID].ServiceName }
		for i := range t.Spans {
			s := &t.Spans[i]
			if p, ok := parentOf(s); ok {
				if parent := byID[p]; parent != nil && proc(parent) != proc(s) {
					remoteChildren[p] = append(remoteChildren[p], s)
				}
			}
		}
		for i := range t.Spans {
			s := &t.Spans[i]
			n++
			kind := spanKind(s)
			count[orNone(kind)]++
			p, hasParent := parentOf(s)
			parent := byID[p]
			remoteParent := hasParent && parent != nil && proc(parent) != proc(s)
			var why string
			switch {
			case strings.HasPrefix(s.OperationName, "gym.") && kind != "internal":
				why = "gym.* spans are internal"
			case kind == "server" && !remoteParent:
				why = "a server span needs a client parent in another process"
			case remoteParent && kind != "server":
				why = "its parent is in another process, so it should be a server span"
			case kind == "client" && len(remoteChildren[s.SpanID]) == 0:
				why = "a client span needs a server child in another process"
			case kind != "client" && len(remoteChildren[s.SpanID]) > 0:
				why = "it has children in another process, so it should be a client span"
			case kind != "client" && kind != "server" && kind != "internal":
				why = "unknown kind"
			}
			if why != "" {
				bad = append(bad, fmt.Sprintf("%s %q in %s is %s: %s", s.SpanID, s.OperationName, proc(s), orNone(kind), why))
			}
		}
	}
	return count, bad, n
}

// parentOf returns the span id of s's CHILD_OF reference.
func parentOf(s *jSpan) (string, bool) {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && r.TraceID == s.TraceID {
			return r.SpanID, true
		}
	}
	return "", false
}

// spanKind is the span.kind tag; OTLP's INTERNAL kind (or none) counts as
// internal.
func spanKind(s *jSpan) string {
	if k, ok := tag(s.Tags, "span.kind"); ok {
		return k
	}
	return "internal"
}

func tag(kvs []jKV, key string) (string, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			return fmt.Sprint(kv.Value), true
		}
	}
	return "", false
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// privacy scans attribute lists for content that must not be exported.
type privacy struct {
	prompts, answers               []string
	attrs, redacted, urls          int
	keyHits, queryHits, promptHits []string
	seen                           map[string]bool
}

func newPrivacy(tasks []taskRecord, rollouts []rolloutRecord) *privacy {
	p := &privacy{}
	for _, t := range tasks {
		if q := strings.TrimSpace(t.Question); q != "" {
			p.prompts = append(p.prompts, q)
		}
	}
	for _, r := range rollouts {
		if a := strings.TrimSpace(r.Answer); len(a) >= 8 { // a bare number could match anything
			p.answers = append(p.answers, a)
		}
	}
	return p
}

// hit records a finding once: process tags repeat in every trace.
func (p *privacy) hit(list *[]string, msg string) {
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	if !p.seen[msg] {
		p.seen[msg] = true
		*list = append(*list, msg)
	}
}

func (p *privacy) scan(where string, kvs []jKV) {
	for _, kv := range kvs {
		p.attrs++
		v, isString := kv.Value.(string)
		if !isString {
			continue
		}
		if sensitiveKey(kv.Key) {
			if v == redacted {
				p.redacted++
			} else {
				p.hit(&p.keyHits, fmt.Sprintf("%s: %s=%.40q", where, kv.Key, v))
			}
		}
		if isURLValue(kv.Key, v) {
			p.urls++
			if strings.Contains(v, "?") {
				p.hit(&p.queryHits, fmt.Sprintf("%s: %s=%.80q", where, kv.Key, v))
			}
		}
		if strings.EqualFold(kv.Key, "url.query") || strings.EqualFold(kv.Key, "http.query") {
			p.hit(&p.queryHits, fmt.Sprintf("%s: has %s", where, kv.Key))
		}
		for _, q := range slices.Concat(p.prompts, p.answers) {
			if strings.Contains(v, q) {
				p.hit(&p.promptHits, fmt.Sprintf("%s: %s quotes %q", where, kv.Key, q))
				break
			}
		}
	}
}

// sensitiveWords mirrors the project's rule (lens.IsSensitiveKey): a key is
// sensitive when one of its dot-separated segments is one of these words or
// ends in "_" and one of them. Case is ignored and '-' counts as '_'.
var sensitiveWords = []string{"prompt", "input_text", "output_text", "text", "password", "token", "secret", "key"}

func sensitiveKey(key string) bool {
	key = strings.ReplaceAll(strings.ToLower(key), "-", "_")
	for _, seg := range strings.Split(key, ".") {
		for _, w := range sensitiveWords {
			if seg == w || strings.HasSuffix(seg, "_"+w) {
				return true
			}
		}
	}
	return false
}

// isURLValue reports whether an attribute holds a URL or a request target.
func isURLValue(key, v string) bool {
	k := strings.ToLower(key)
	switch k {
	case "url.full", "url.path", "http.url", "http.target", "url.original":
		return true
	}
	return strings.Contains(v, "://")
}

func missing(want, have []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}

func sortedTraces(m map[string]*jTrace) []*jTrace {
	out := make([]*jTrace, 0, len(m))
	for _, t := range m {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TraceID < out[j].TraceID })
	return out
}

func readJSONL[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New(path + ": empty")
	}
	return out, nil
}
