package rollout

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/protocol"
)

// agentURLs are the endpoints of one agent.
type agentURLs struct {
	run, aggregate string
}

// plan is a checked run: the expanded rows and what calling them needs.
type plan struct {
	// rows are the rollouts, in the order they are handed out; each has
	// its task index, rollout index and agent_ref set. agents holds the
	// name of each one's agent.
	rows   []protocol.RunRequest
	agents []string
	// urls are the endpoints of every agent of Options.Agents.
	urls        map[string]agentURLs
	concurrency int
	maxAttempts int
}

// prepare checks opts and rows and expands the rows into rollouts, as
// upstream's collector preprocesses a dataset; nothing is touched yet.
func prepare(rows []protocol.RunRequest, opts *Options) (*plan, error) {
	if opts.Output == "" {
		return nil, fmt.Errorf("rollout: Options.Output is required")
	}
	p := &plan{urls: make(map[string]agentURLs, len(opts.Agents)), concurrency: opts.Concurrency}
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
	for name, base := range opts.Agents {
		u, err := agentURL(base)
		if err != nil {
			return nil, fmt.Errorf("rollout: agent %s: %w", name, err)
		}
		p.urls[name] = agentURLs{run: u.JoinPath(protocol.PathRun).String(),
			aggregate: u.JoinPath(protocol.PathAggregateMetrics).String()}
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
			// raw lines; the encoding stands for the raw line.
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
		if !present && opts.DefaultAgent != "" {
			row.AgentRef = protocol.AgentRef(opts.DefaultAgent)
			name = opts.DefaultAgent
		}
		if name == "" {
			noAgent = append(noAgent, i+1)
			continue
		}
		if _, ok := p.urls[name]; !ok {
			unknown[name] = append(unknown[name], i+1)
			continue
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
			p.agents = append(p.agents, name)
		}
	}
	switch {
	case len(noAgent) > 0:
		return nil, fmt.Errorf("rollout: %s name no agent (agent_ref.name) and Options.DefaultAgent is empty", rowList(noAgent))
	case len(unknown) > 0:
		name := firstKey(unknown)
		return nil, fmt.Errorf("rollout: agent %q of %s has no URL in Options.Agents", name, rowList(unknown[name]))
	case len(noRepeats) > 0:
		name := firstKey(noRepeats)
		return nil, fmt.Errorf("rollout: Options.NumRepeatsByAgent has no entry for agent %q (%s) and no %q", name, rowList(noRepeats[name]), DefaultRepeatsKey)
	}
	return p, nil
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

// agentURL checks an agent's base URL.
func agentURL(base string) (*url.URL, error) {
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
