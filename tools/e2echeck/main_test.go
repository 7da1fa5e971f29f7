package main

import (
	"strings"
	"testing"
)

var testCfg = config{prefix: "nemo-gym/", orch: "orchestrator", agent: "simple_agent", model: "policy_model", res: "arithmetic"}

// rolloutTrace builds the trace one healthy rollout leaves in Jaeger:
// orchestrator client -> agent server -> rollout -> (responses -> client ->
// model server -> model span) and (client -> resources server -> verify).
func rolloutTrace(traceID, rolloutID string) *jTrace {
	t := &jTrace{TraceID: traceID, Processes: map[string]jProcess{
		"p1": {ServiceName: "nemo-gym/orchestrator", Tags: []jKV{{Key: attrRunID, Value: "run1"}}},
		"p2": {ServiceName: "nemo-gym/simple_agent", Tags: []jKV{{Key: attrRunID, Value: "run1"}}},
		"p3": {ServiceName: "nemo-gym/policy_model", Tags: []jKV{{Key: attrRunID, Value: "run1"}}},
		"p4": {ServiceName: "nemo-gym/arithmetic", Tags: []jKV{{Key: attrRunID, Value: "run1"}}},
	}}
	add := func(id, parent, proc, name, kind string, tags ...jKV) {
		s := jSpan{TraceID: traceID, SpanID: id, OperationName: name, ProcessID: proc, Tags: tags}
		if kind != "" {
			s.Tags = append(s.Tags, jKV{Key: "span.kind", Value: kind})
		}
		if parent != "" {
			s.References = []jRef{{RefType: "CHILD_OF", TraceID: traceID, SpanID: parent}}
		}
		t.Spans = append(t.Spans, s)
	}
	rid := jKV{Key: attrRolloutID, Value: rolloutID}
	url := func(route string) jKV {
		return jKV{Key: "url.full", Value: "http://127.0.0.1:2/ng-rollout/" + rolloutID + route}
	}
	add("a", "", "p1", "HTTP POST", "client", rid, jKV{Key: "url.full", Value: "http://127.0.0.1:1/run"})
	add("b", "a", "p2", "POST /run", "server", rid)
	add("c", "b", "p2", "gym.rollout", "internal", rid)
	add("d", "c", "p2", "gym.agent.responses", "internal", rid)
	add("e", "d", "p2", "HTTP POST", "client", rid, url("/v1/responses"))
	add("f", "e", "p3", "POST /v1/responses", "server", rid)
	add("g", "f", "p3", "gym.model.responses", "internal", rid)
	add("h", "c", "p2", "HTTP POST", "client", rid, url("/verify"))
	add("i", "h", "p4", "POST /verify", "server", rid)
	add("j", "i", "p4", "gym.verify", "", rid)
	return t
}

func find(t *jTrace, id string) *jSpan {
	for i := range t.Spans {
		if t.Spans[i].SpanID == id {
			return &t.Spans[i]
		}
	}
	return nil
}

func setKind(s *jSpan, kind string) {
	for i := range s.Tags {
		if s.Tags[i].Key == "span.kind" {
			s.Tags[i].Value = kind
		}
	}
}

func TestHealthyTracePasses(t *testing.T) {
	traces := map[string]*jTrace{"t1": rolloutTrace("t1", "r1"), "t2": rolloutTrace("t2", "r2")}
	rs := judgeRollouts(testCfg, []rolloutRecord{{RolloutID: "r1", TraceID: "t1"}, {RolloutID: "r2"}}, traces)
	if !allComplete(rs) {
		t.Fatalf("healthy traces judged incomplete: %+v", rs)
	}
	if got := len(rs[0].hops); got != 3 {
		t.Fatalf("hops = %d, want 3", got)
	}
	counts, bad, n := judgeKinds(traces)
	if len(bad) > 0 || n != 20 || counts["server"] != 6 || counts["client"] != 6 || counts["internal"] != 8 {
		t.Fatalf("kinds: counts %v, bad %v, n %d", counts, bad, n)
	}
}

func TestBrokenShapesFail(t *testing.T) {
	cases := map[string]struct {
		mutate   func(*jTrace)
		rollouts bool // judgeRollouts must flag it
		kinds    bool // judgeKinds must flag it
	}{
		"model server span parented by an internal span": {
			mutate:   func(tr *jTrace) { find(tr, "f").References[0].SpanID = "d" },
			rollouts: true, kinds: true,
		},
		"callee span not marked server": {
			mutate:   func(tr *jTrace) { setKind(find(tr, "i"), "internal") },
			rollouts: true, kinds: true,
		},
		"caller span not marked client": {
			mutate:   func(tr *jTrace) { setKind(find(tr, "e"), "internal") },
			rollouts: true, kinds: true,
		},
		"resources spans missing (propagation lost)": {
			mutate: func(tr *jTrace) {
				tr.Spans = tr.Spans[:8]
			},
			rollouts: true, kinds: true, // the verify client span has no server child
		},
		"server span without parent": {
			mutate:   func(tr *jTrace) { find(tr, "f").References = nil },
			rollouts: true, kinds: true,
		},
		"gym span marked client": {
			mutate: func(tr *jTrace) { setKind(find(tr, "g"), "client") },
			kinds:  true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr := rolloutTrace("t1", "r1")
			tc.mutate(tr)
			traces := map[string]*jTrace{"t1": tr}
			rs := judgeRollouts(testCfg, []rolloutRecord{{RolloutID: "r1"}}, traces)
			if got := !allComplete(rs); got != tc.rollouts {
				t.Errorf("rollout judged broken = %v, want %v (%+v)", got, tc.rollouts, rs)
			}
			_, bad, _ := judgeKinds(traces)
			if got := len(bad) > 0; got != tc.kinds {
				t.Errorf("kinds judged broken = %v, want %v (%v)", got, tc.kinds, bad)
			}
		})
	}
}

func TestRolloutInTwoTraces(t *testing.T) {
	traces := map[string]*jTrace{"t1": rolloutTrace("t1", "r1"), "t2": rolloutTrace("t2", "r1")}
	rs := judgeRollouts(testCfg, []rolloutRecord{{RolloutID: "r1"}}, traces)
	if rs[0].traces != 2 || allComplete(rs) {
		t.Fatalf("a rollout in two traces passed: %+v", rs)
	}
}

func TestOfRun(t *testing.T) {
	tr := rolloutTrace("t1", "r1")
	if !ofRun(tr, "run1") || ofRun(tr, "run2") {
		t.Fatal("run filter wrong")
	}
}

func TestSensitiveKey(t *testing.T) {
	for key, want := range map[string]bool{
		"api_key":                    true,
		"x-api-key":                  true,
		"gen_ai.prompt.0.content":    true,
		"llm.input_text":             true,
		"access_token":               true,
		"db.password":                true,
		"Secret":                     true,
		"gen_ai.usage.input_tokens":  false,
		"nemo.gym.rollout.id":        false,
		"url.full":                   false,
		"http.request.method":        false,
		"keyboard":                   false,
		"gen_ai.response.finish_key": true,
	} {
		if got := sensitiveKey(key); got != want {
			t.Errorf("sensitiveKey(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestPrivacyScan(t *testing.T) {
	p := newPrivacy([]taskRecord{{Question: "What is 1 + 2?"}}, []rolloutRecord{{Answer: "The answer is 3."}})
	p.scan("s", []jKV{
		{Key: "api_key", Value: redacted},
		{Key: "url.full", Value: "http://127.0.0.1:9/verify"},
		{Key: "gen_ai.usage.input_tokens", Value: 5.0},
	})
	if len(p.keyHits)+len(p.queryHits)+len(p.promptHits) != 0 || p.redacted != 1 || p.urls != 1 {
		t.Fatalf("clean attributes flagged: %+v", p)
	}
	p.scan("s", []jKV{
		{Key: "x-api-key", Value: "sk-123"},
		{Key: "url.full", Value: "http://127.0.0.1:9/verify?key=1"},
		{Key: "url.query", Value: "a=b"},
		{Key: "error.message", Value: "bad input: What is 1 + 2?"},
		{Key: "note", Value: "The answer is 3."},
	})
	if len(p.keyHits) != 1 || len(p.queryHits) != 2 || len(p.promptHits) != 2 {
		t.Fatalf("findings: keys %v, queries %v, prompts %v", p.keyHits, p.queryHits, p.promptHits)
	}
	p.scan("s", []jKV{{Key: "x-api-key", Value: "sk-123"}})
	if len(p.keyHits) != 1 {
		t.Fatalf("a repeated finding is listed twice: %v", p.keyHits)
	}
	if !strings.Contains(p.keyHits[0], "x-api-key") {
		t.Fatalf("finding does not name the key: %v", p.keyHits)
	}
}

func TestRolloutIDOnEverySpan(t *testing.T) {
	healthy := map[string]*jTrace{"t1": rolloutTrace("t1", "3-1"), "t2": rolloutTrace("t2", "0-2-a1")}
	rollouts := []rolloutRecord{{RolloutID: "3-1"}, {RolloutID: "0-2-a1"}}
	got := judgeRolloutIDs(testCfg, rollouts, healthy)
	if got.total != 20 || len(got.idProblems) != 0 || got.calls != 4 || len(got.pathProblems) != 0 ||
		got.withID["policy_model"] != 4 || got.withID["orchestrator"] != 2 {
		t.Fatalf("healthy traces: %+v", got)
	}
	for name, tc := range map[string]struct {
		mutate      func(*jTrace)
		ids, prefix bool // which finding must appear
	}{
		"model server span without the id": {mutate: func(tr *jTrace) { find(tr, "f").Tags = find(tr, "f").Tags[1:] }, ids: true},
		"verify span with another id":      {mutate: func(tr *jTrace) { find(tr, "j").Tags[0].Value = "3-1-a1" }, ids: true},
		"model call not prefixed": {mutate: func(tr *jTrace) {
			find(tr, "e").Tags[1].Value = "http://127.0.0.1:2/v1/responses"
		}, prefix: true},
		"verify prefixed with another id": {mutate: func(tr *jTrace) {
			find(tr, "h").Tags[1].Value = "http://127.0.0.1:2/ng-rollout/3-10/verify"
		}, prefix: true},
	} {
		t.Run(name, func(t *testing.T) {
			tr := rolloutTrace("t1", "3-1")
			tc.mutate(tr)
			got := judgeRolloutIDs(testCfg, rollouts[:1], map[string]*jTrace{"t1": tr})
			if (len(got.idProblems) > 0) != tc.ids || (len(got.pathProblems) > 0) != tc.prefix {
				t.Errorf("id problems %q, path problems %q; want ids %v, prefix %v", got.idProblems, got.pathProblems, tc.ids, tc.prefix)
			}
		})
	}
}
