package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/protocol"
)

// target is where a group of rollouts is sent: an environment server
// that names their agent, or the agent itself when the fleet has none
// for it.
type target struct {
	// key groups the rollouts for /aggregate_metrics: the environment
	// server's instance name, else the agent's.
	key string
	// agent is the agent the rollouts are attributed to.
	agent string
	// server is the environment server, "" when the agent is called
	// directly; resultType is its implementation.
	server, resultType string
	run, aggregate     string
}

// plan is a checked run: the expanded rows and what calling them needs.
type plan struct {
	// rows are the rollouts, in the order they are handed out; each has
	// its task index, rollout index and agent_ref set. targets holds
	// each one's target.
	rows    []protocol.RunRequest
	targets []*target
	// router routes agents and environment servers to targets.
	router      *router
	concurrency int
	maxAttempts int
}

// router resolves where rows go, from Options.Agents and
// Options.Environments, making each target once.
type router struct {
	agents  map[string]*url.URL
	envs    map[string]EnvironmentServer
	byAgent map[string][]string // agent -> environment servers naming it, sorted
	made    map[string]*target
	// direct lists the agents called without an environment server,
	// for the one log line that says so.
	direct []string
}

func newRouter(opts *Options) (*router, error) {
	r := &router{agents: map[string]*url.URL{}, envs: opts.Environments, byAgent: map[string][]string{}, made: map[string]*target{}}
	for name, base := range opts.Agents {
		u, err := baseURL(base)
		if err != nil {
			return nil, fmt.Errorf("rollout: agent %s: %w", name, err)
		}
		r.agents[name] = u
	}
	for name, env := range opts.Environments {
		if _, err := baseURL(env.URL); err != nil {
			return nil, fmt.Errorf("rollout: environment server %s: %w", name, err)
		}
		for _, agent := range env.Agents {
			r.byAgent[agent] = append(r.byAgent[agent], name)
		}
	}
	for _, servers := range r.byAgent {
		slices.Sort(servers)
	}
	return r, nil
}

// errNoURL marks an agent the options give no way to reach.
var errNoURL = errors.New("no URL")

// forAgent returns the target of rows routed by their agent: the one
// environment server that names it, else the agent itself. Two
// environment servers naming it are an error, as upstream refuses to
// choose (AmbiguousEnvironmentServerError).
func (r *router) forAgent(agent string) (*target, error) {
	servers := r.byAgent[agent]
	switch {
	case len(servers) > 1:
		return nil, fmt.Errorf("agent %q is fronted by several environment servers (%s): rows that route by agent cannot choose between them",
			agent, strings.Join(servers, ", "))
	case len(servers) == 1:
		return r.forServer(servers[0], agent)
	}
	if t, ok := r.made[agent]; ok && t.server == "" {
		return t, nil
	}
	u, ok := r.agents[agent]
	if !ok {
		return nil, errNoURL
	}
	t := &target{key: agent, agent: agent,
		run: u.JoinPath(protocol.PathRun).String(), aggregate: u.JoinPath(protocol.PathAggregateMetrics).String()}
	r.made[agent] = t
	r.direct = append(r.direct, agent)
	return t, nil
}

// forServer returns the target of environment server name, its rollouts
// attributed to agent ("" for the server's own: its agent_server, or
// its only agent).
func (r *router) forServer(name, agent string) (*target, error) {
	env, ok := r.envs[name]
	if !ok {
		return nil, fmt.Errorf("environment server %q is not in the fleet", name)
	}
	if t, ok := r.made[name]; ok && t.server == name {
		return t, nil
	}
	if agent == "" && len(env.Agents) == 1 {
		agent = env.Agents[0]
	}
	u, _ := baseURL(env.URL) // checked by newRouter
	t := &target{key: name, agent: agent, server: name, resultType: env.Impl,
		run: u.JoinPath(protocol.PathRun).String(), aggregate: u.JoinPath(protocol.PathAggregateMetrics).String()}
	r.made[name] = t
	return t, nil
}

// prepare checks opts and rows and expands the rows into rollouts, as
// upstream's collector preprocesses a dataset; nothing is touched yet.
func prepare(rows []protocol.RunRequest, opts *Options) (*plan, error) {
	if opts.Output == "" {
		return nil, fmt.Errorf("rollout: Options.Output is required")
	}
	p := &plan{concurrency: opts.Concurrency}
	if p.concurrency <= 0 {
		p.concurrency = DefaultConcurrency
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = DefaultProgressEvery
	}
	var err error
	if p.maxAttempts, err = maxAttempts(opts.MaxAttempts); err != nil {
		return nil, err
	}
	if p.router, err = newRouter(opts); err != nil {
		return nil, err
	}
	if opts.NumRepeats < 0 {
		return nil, fmt.Errorf("rollout: Options.NumRepeats is %d; want 1 or more", opts.NumRepeats)
	}
	for name, n := range opts.NumRepeatsByAgent {
		if n < 1 {
			return nil, fmt.Errorf("rollout: Options.NumRepeatsByAgent[%q] is %d; want 1 or more", name, n)
		}
	}
	if opts.Limit > 0 && opts.Limit < len(rows) {
		rows = rows[:opts.Limit]
	}

	var noAgent []int
	unknown := map[string][]int{}
	noRepeats := map[string][]int{}
	var overridden [][2]string
	taskOf := map[string]int{}   // a row's encoding -> its task index
	nextRollout := map[int]int{} // task index -> next rollout index
	p.rows = make([]protocol.RunRequest, 0, len(rows))
	for i, row := range rows {
		if err := dataset.CheckRow(&row); err != nil {
			return nil, fmt.Errorf("rollout: row %d: %w", i+1, err)
		}
		task := 0
		if row.TaskIndex != nil {
			task = *row.TaskIndex
		} else {
			// Identical rows are one task, as upstream numbers identical
			// raw lines; the encoding (before any routing) stands for the
			// raw line.
			enc, err := row.MarshalJSON()
			if err != nil {
				return nil, fmt.Errorf("rollout: row %d: %w", i+1, err)
			}
			var seen bool
			if task, seen = taskOf[string(enc)]; !seen {
				task = len(taskOf)
				taskOf[string(enc)] = task
			}
		}
		name, present, _ := dataset.AgentName(&row) // CheckRow saw it
		server, stamped, err := stringField(row.Fields, KeyEnvironmentServer)
		if err != nil {
			return nil, fmt.Errorf("rollout: row %d: %w", i+1, err)
		}
		var tgt *target
		switch {
		case stamped:
			// Routed by the environment server it names, as upstream's
			// legacy routing stamps rows.
			if tgt, err = p.router.forServer(server, ""); err != nil {
				return nil, fmt.Errorf("rollout: row %d: %w", i+1, err)
			}
			if env := opts.Environments[server]; present && name != "" && !slices.Contains(env.Agents, name) {
				return nil, fmt.Errorf("rollout: row %d: agent_ref %q is not an agent of environment server %q (%s)",
					i+1, name, server, strings.Join(env.Agents, ", "))
			}
			if !present && tgt.agent != "" {
				name = tgt.agent
				stampAgent(&row, name)
			}
		case opts.AgentOverride != "":
			if present && name != "" && name != opts.AgentOverride {
				pair := [2]string{name, opts.AgentOverride}
				if !slices.Contains(overridden, pair) {
					overridden = append(overridden, pair)
				}
			}
			name = opts.AgentOverride
			stampAgent(&row, name)
		case !present || name == "":
			source, hasSource, err := stringField(row.Fields, KeyTaskSource)
			if err != nil {
				return nil, fmt.Errorf("rollout: row %d: %w", i+1, err)
			}
			switch {
			case hasSource:
				if name, err = resolveSource(source, opts.TaskSources); err != nil {
					return nil, fmt.Errorf("rollout: row %d: cannot resolve %s to an agent: %w", i+1, KeyTaskSource, err)
				}
				stampAgent(&row, name)
			case !present && opts.DefaultAgent != "":
				row.AgentRef = protocol.AgentRef(opts.DefaultAgent)
				name = opts.DefaultAgent
			}
		}
		if name == "" && tgt == nil {
			noAgent = append(noAgent, i+1)
			continue
		}
		if tgt == nil {
			if tgt, err = p.router.forAgent(name); errors.Is(err, errNoURL) {
				unknown[name] = append(unknown[name], i+1)
				continue
			} else if err != nil {
				return nil, fmt.Errorf("rollout: row %d: %w", i+1, err)
			}
		}
		repeats := max(opts.NumRepeats, 1)
		if opts.NumRepeatsByAgent != nil {
			n, ok := opts.NumRepeatsByAgent[name]
			if !ok {
				n, ok = opts.NumRepeatsByAgent[DefaultRepeatsKey]
			}
			if !ok {
				noRepeats[name] = append(noRepeats[name], i+1)
				continue
			}
			repeats = n
		}
		for range repeats {
			r := row
			r.TaskIndex = intPtr(task)
			r.RolloutIndex = intPtr(nextRollout[task])
			nextRollout[task]++
			if _, _, err := r.ResolveRolloutID(); err != nil {
				return nil, fmt.Errorf("rollout: row %d: %w", i+1, err)
			}
			p.rows = append(p.rows, r)
			p.targets = append(p.targets, tgt)
		}
	}
	switch {
	case len(noAgent) > 0:
		return nil, fmt.Errorf("rollout: %s name no agent (agent_ref.name or %s) and Options.DefaultAgent is empty", rowList(noAgent), KeyTaskSource)
	case len(unknown) > 0:
		name := firstKey(unknown)
		return nil, fmt.Errorf("rollout: agent %q of %s is not in the fleet (no URL in Options.Agents, no environment server naming it)", name, rowList(unknown[name]))
	case len(noRepeats) > 0:
		name := firstKey(noRepeats)
		return nil, fmt.Errorf("rollout: Options.NumRepeatsByAgent has no entry for agent %q (%s) and no %q", name, rowList(noRepeats[name]), DefaultRepeatsKey)
	}
	if len(overridden) > 0 {
		parts := make([]string, len(overridden))
		for i, o := range overridden {
			parts[i] = o[0] + " -> " + o[1]
		}
		opts.logger().Warn("rollout: the agent override re-routed rows whose agent_ref named another agent; "+
			"as in NeMo Gym 0.7, it re-routes every row, not only those without agent_ref", "rerouted", strings.Join(parts, ", "))
	}
	for _, agent := range p.router.direct {
		how := "the fleet's config has no environment server naming it"
		if opts.Environments == nil {
			how = "no environment servers were given (such as with --agent-url)"
		}
		opts.logger().Info("rollout: calling the agent's /run directly: "+how+
			"; NeMo Gym 0.7 collects only through environment servers, and these lines carry no "+KeyEnvironmentServer,
			"agent", agent, "url", p.router.agents[agent].String())
	}
	return p, nil
}

// stampAgent sets a row's agent_ref to {"name": name}, as upstream stamps
// the rows it routes.
func stampAgent(row *protocol.RunRequest, name string) {
	row.AgentRef = nil
	row.Fields = slices.Clone(row.Fields) // the caller's row shares the members
	_ = row.Fields.Set(protocol.KeyAgentRef, map[string]string{"name": name})
}

// stringField reads a member that must be a string when present (null
// counts as absent).
func stringField(f protocol.Fields, key string) (string, bool, error) {
	raw, ok := f.Get(key)
	if !ok || isNull(raw) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, fmt.Errorf("%s must be a string: %s", key, raw)
	}
	return s, true, nil
}

// resolveSource resolves a row's task_source through Options.TaskSources.
func resolveSource(source string, sources map[string]TaskSource) (string, error) {
	ts, ok := sources[source]
	if !ok {
		msg := fmt.Sprintf("%q: not in the running config", source)
		known := slices.Sorted(maps.Keys(sources))
		if n := gymconfig.Nearest(source, known); n != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", n)
		}
		return "", errors.New(msg)
	}
	if ts.Err != "" {
		return "", fmt.Errorf("%q: %s", source, ts.Err)
	}
	return ts.Agent, nil
}

// maxAttempts resolves Options.MaxAttempts.
func maxAttempts(n int) (int, error) {
	switch {
	case n > 0:
		return n, nil
	case n < 0:
		return 0, fmt.Errorf("rollout: Options.MaxAttempts is %d; want 1 or more", n)
	}
	raw := strings.TrimSpace(os.Getenv(EnvMaxAttempts))
	if raw == "" {
		return DefaultMaxAttempts, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("rollout: %s=%q: want a positive integer", EnvMaxAttempts, raw)
	}
	return n, nil
}

// baseURL checks a server's base URL.
func baseURL(base string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("URL %q: %w", base, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("URL %q: want http://host:port", base)
	}
	return u, nil
}

// rowList names 1-based row positions: "row 3", "rows 1, 4, 9" (the first
// ten, then a count).
func rowList(rows []int) string {
	if len(rows) == 1 {
		return "row " + strconv.Itoa(rows[0])
	}
	parts := make([]string, 0, 11)
	for i, r := range rows {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(rows)-10))
			break
		}
		parts = append(parts, strconv.Itoa(r))
	}
	return "rows " + strings.Join(parts, ", ")
}

// firstKey returns the smallest key of m, so errors do not depend on map
// order.
func firstKey(m map[string][]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys[0]
}

func intPtr(n int) *int { return &n }
