package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/live"
	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/rollout"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// Strings planted in what the collector and the agent exchange (prompt,
// answer, error body, header); no snapshot may hold one.
const (
	plantedPrompt = "PLANTED-PROMPT-7f3a"
	plantedAnswer = "PLANTED-ANSWER-91bc"
	plantedBody   = "PLANTED-BODY-c0de"
	plantedHeader = "PLANTED-HEADER-5eed"
)

// episodeAgent is an agent on loopback, on the project's server runtime,
// that reports its episodes in flight on live.EpisodesPath as a gymlens
// agent does: each /run is an episode under the row's rollout id, at
// model_call turn 1 after one seed_session step. Task failTask answers
// 500 on every attempt; the rollout of task holdTask is held until the
// poller asks again after a report that listed it (its poll of one
// agent is sequential: the report was observed by then).
type episodeAgent struct {
	URL                string
	failTask, holdTask int
	// token, when set, is the head token EpisodesPath wants as a bearer
	// token (401 without it).
	token string

	mu       sync.Mutex
	inFlight map[string]time.Time // rollout id -> start
	reports  int
	listed   int           // reports that listed holdTask's rollout
	held     chan struct{} // closed when the poller asks after such a report
	heldOnce sync.Once
}

func startEpisodeAgent(t testing.TB, failTask, holdTask int) *episodeAgent {
	return startTokenEpisodeAgent(t, failTask, holdTask, "")
}

func startTokenEpisodeAgent(t testing.TB, failTask, holdTask int, token string) *episodeAgent {
	t.Helper()
	a := &episodeAgent{failTask: failTask, holdTask: holdTask, token: token, inFlight: map[string]time.Time{}, held: make(chan struct{})}
	s := server.New(server.Options{Name: "episode_agent"})
	s.HandleFunc("POST "+protocol.PathRun, func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		var row protocol.RunRequest
		if err == nil {
			err = json.Unmarshal(raw, &row)
		}
		id, ok, idErr := row.ResolveRolloutID()
		if err != nil || !ok || idErr != nil {
			http.Error(w, fmt.Sprint("bad row: ", err, idErr), http.StatusUnprocessableEntity)
			return
		}
		a.mu.Lock()
		a.inFlight[id] = time.Now()
		a.mu.Unlock()
		defer func() {
			a.mu.Lock()
			delete(a.inFlight, id)
			a.mu.Unlock()
		}()
		w.Header().Set("X-Agent-Note", plantedHeader)
		if *row.TaskIndex == a.holdTask {
			select {
			case <-a.held:
			case <-r.Context().Done():
				return
			}
		}
		if *row.TaskIndex == a.failTask {
			http.Error(w, plantedBody, http.StatusInternalServerError)
			return
		}
		var out protocol.Fields
		_ = out.UnmarshalJSON(raw)
		_ = out.Set(protocol.KeyReward, 1.0)
		_ = out.Set("extracted_answer", plantedAnswer)
		w.Header().Set("Content-Type", "application/json")
		b, _ := out.MarshalJSON()
		_, _ = w.Write(b)
	})
	s.HandleFunc("GET "+live.EpisodesPath, func(w http.ResponseWriter, r *http.Request) {
		if a.token != "" && r.Header.Get("Authorization") != "Bearer "+a.token {
			http.Error(w, `{"detail":"head token wanted"}`, http.StatusUnauthorized)
			return
		}
		now := time.Now()
		rep := live.EpisodesReport{Server: "episode_agent", Time: now, WindowSeconds: 60, Episodes: []live.Episode{},
			Stages: []live.StageStats{{Stage: live.StageModel, Count: 10, SuccessRate: 1, P50MS: 1, P95MS: 2, P99MS: 3}}}
		holdID := fmt.Sprintf("%d-0", a.holdTask)
		a.mu.Lock()
		if a.listed > 0 {
			a.heldOnce.Do(func() { close(a.held) })
		}
		listedHeld := false
		for id, start := range a.inFlight {
			rep.Episodes = append(rep.Episodes, live.Episode{RolloutID: id, Stage: live.StageModel, Turn: 1,
				StageStart: start.Add(time.Millisecond), Start: start, LastProgress: start.Add(time.Millisecond),
				Steps: []live.Step{{Stage: live.StageSeed, Start: start, DurationMS: 1, Status: 200}}})
			listedHeld = listedHeld || id == holdID
		}
		a.reports++
		if listedHeld {
			a.listed++
		}
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(rep)
	})
	a.URL, _ = servertest.Start(t, s)
	return a
}

// plantedRows are n tasks whose prompt holds plantedPrompt.
func plantedRows(t *testing.T, n int) []protocol.RunRequest {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"responses_create_params":{"input":[{"role":"user","content":"%s task %d"}]},"expected_answer":"%d"}`,
			plantedPrompt, i, i)
	}
	return rowsFrom(t, lines...)
}

// snapshotsClean fails the test when a snapshot of tr, under any filter,
// holds a planted string.
func snapshotsClean(t *testing.T, tr *live.Tracker) {
	t.Helper()
	for _, f := range []live.Filter{{}, {State: live.Done, Limit: live.MaxLimit}, {State: live.Failed, Limit: live.MaxLimit}, {State: live.Cancelled, Limit: live.MaxLimit}} {
		b, err := json.Marshal(tr.Snapshot(f))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{plantedPrompt, plantedAnswer, plantedBody, plantedHeader} {
			if strings.Contains(string(b), p) {
				t.Errorf("snapshot (%+v) holds %s: %s", f, p, b)
			}
		}
	}
}

// A run with a tracker attached: every rollout ends in the snapshot as the
// files record it, the agent's episodes reach the rollouts by their ids
// (its steps and stages), a rollout that failed every attempt shows its
// last attempt's id, class and status, and no snapshot holds a prompt, an
// answer, an error body or a header value.
func TestCollectLive(t *testing.T) {
	const tasks, repeats, failTask, holdTask = 60, 2, 7, 59
	agent := startEpisodeAgent(t, failTask, holdTask)
	tr, err := live.NewTracker(live.DefaultRules(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := outPath(t)
	opts := rollout.Options{Agents: map[string]string{agentName: agent.URL}, Output: out, DefaultAgent: agentName,
		NumRepeats: repeats, Concurrency: 4, MaxAttempts: 2, DisableAggregation: true,
		Live: tr, LiveEvery: 5 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	sum, err := rollout.Collect(ctx, plantedRows(t, tasks), opts)
	if !errors.Is(err, rollout.ErrFailedRollouts) || sum.Failed != repeats {
		t.Fatalf("%+v, %v; want task %d's %d rollouts failed", sum, err, failTask, repeats)
	}
	lines, fails := readLines(t, out), readLines(t, rollout.FailuresPath(out))
	s := tr.Snapshot(live.Filter{})
	want := live.Counts{Done: int64(len(lines)), Failed: int64(len(fails))}
	if s.Counts != want || s.Total != tasks*repeats || !s.Ended || len(s.Rollouts) != 0 {
		t.Errorf("final snapshot: counts %+v, total %d, ended %v, %d listed; want %+v (the files' lines), %d, true, 0",
			s.Counts, s.Total, s.Ended, len(s.Rollouts), want, tasks*repeats)
	}
	if len(s.Servers) != 1 {
		t.Fatalf("servers %+v", s.Servers)
	}
	srv := s.Servers[0]
	if srv.Agent != agentName || srv.Done != want.Done || srv.Failed != want.Failed || !srv.Reporting ||
		len(srv.Stages) != 1 || srv.Stages[0].Stage != live.StageModel || srv.Run.Count == 0 {
		t.Errorf("server row %+v", srv)
	}
	held := tr.Snapshot(live.Filter{RolloutID: fmt.Sprintf("%d-0", holdTask)})
	if len(held.Rollouts) != 1 {
		t.Fatalf("the held rollout: %+v", held.Rollouts)
	}
	ro := held.Rollouts[0]
	if ro.State != live.Done || ro.TaskIndex != holdTask || ro.Repeat != 0 || ro.Attempt != 0 || ro.Agent != agentName ||
		len(ro.Steps) != 1 || ro.Steps[0].Stage != live.StageSeed || ro.Status != http.StatusOK {
		t.Errorf("the held rollout, which the agent reported: %+v", ro)
	}
	failed := tr.Snapshot(live.Filter{State: live.Failed})
	if len(failed.Rollouts) != repeats {
		t.Fatalf("failed: %+v", failed.Rollouts)
	}
	for _, ro := range failed.Rollouts {
		if ro.TaskIndex != failTask || ro.Attempt != 1 || ro.RolloutID != fmt.Sprintf("%d-%d-a1", failTask, ro.Repeat) ||
			ro.ErrorClass != "ClientResponseError" || ro.Status != http.StatusInternalServerError {
			t.Errorf("failed rollout %+v", ro)
		}
	}
	snapshotsClean(t, tr)
	agent.mu.Lock()
	t.Logf("%d episode reports served; final counts %+v", agent.reports, s.Counts)
	agent.mu.Unlock()
}

// An agent that is not gymlens's (no EpisodesPath: 404) is asked once;
// its rollouts show the collector's view and the counts still match the
// files. A cancelled run cancels what was in flight and what was queued.
func TestCollectLiveWithoutEpisodesAndCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int64
	const quick, tasks = 10, 100
	agent := startAgent(t, func(rctx context.Context, c call) answer {
		if calls.Add(1) <= quick {
			return answer{}
		}
		cancel()
		<-rctx.Done()
		return answer{Status: http.StatusInternalServerError}
	})
	tr, err := live.NewTracker(live.DefaultRules(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := outPath(t)
	opts := options(agent, out)
	opts.Concurrency, opts.Live, opts.LiveEvery = 4, tr, 5*time.Millisecond
	sum, err := rollout.Collect(ctx, dataset.Arithmetic(tasks, 1), opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	s := tr.Snapshot(live.Filter{})
	lines := readLines(t, out)
	if s.Counts.Done != int64(len(lines)) || s.Counts.Done != int64(sum.Succeeded) || s.Counts.Failed != 0 ||
		s.Counts.Cancelled != int64(tasks-len(lines)) || s.Counts.Queued+s.Counts.Active+s.Counts.Slow+s.Counts.Stalled+s.Counts.Retrying != 0 {
		t.Errorf("cancelled run: counts %+v for %d lines of %d", s.Counts, len(lines), tasks)
	}
	if s.Servers[0].Reporting || len(s.Servers[0].Stages) != 0 {
		t.Errorf("an agent without %s reports: %+v", live.EpisodesPath, s.Servers[0])
	}
	if c := tr.Snapshot(live.Filter{State: live.Cancelled}); len(c.Rollouts) == 0 || c.Rollouts[0].State != live.Cancelled {
		t.Errorf("the rollouts cut short are not listed cancelled: %+v", c.Rollouts)
	}
}

// A fleet with a head token: the poller's client sends it (an
// orchestrator.BearerTransport, as the command gives it) and the agent's
// episodes reach the tracker; without it the agent refuses, is asked no
// more, and the run goes on all the same.
func TestCollectLiveHeadToken(t *testing.T) {
	const token = "live-test-head-token-0123456789"
	for _, withToken := range []bool{true, false} {
		hold := -1
		if withToken {
			hold = 3 // held until a report listed it, so one was observed
		}
		agent := startTokenEpisodeAgent(t, -1, hold, token)
		tr, err := live.NewTracker(live.DefaultRules(), nil)
		if err != nil {
			t.Fatal(err)
		}
		out := outPath(t)
		opts := rollout.Options{Agents: map[string]string{agentName: agent.URL}, Output: out, DefaultAgent: agentName,
			DisableAggregation: true, Live: tr, LiveEvery: 5 * time.Millisecond}
		if withToken {
			client := &http.Client{Transport: &orchestrator.BearerTransport{Token: token, Base: &http.Transport{}}}
			defer client.CloseIdleConnections()
			opts.LiveClient = client
		}
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		sum, err := rollout.Collect(ctx, plantedRows(t, 8), opts)
		cancel()
		if err != nil || sum.Succeeded != 8 {
			t.Fatalf("token %v: %+v, %v", withToken, sum, err)
		}
		s := tr.Snapshot(live.Filter{})
		if s.Counts.Done != int64(len(readLines(t, out))) || s.Servers[0].Reporting != withToken {
			t.Errorf("token %v: counts %+v, server %+v", withToken, s.Counts, s.Servers[0])
		}
	}
}

// BenchmarkCollectLive is the collector's throughput against a loopback
// agent with no tracker and with one (polling the agent every second),
// measured in the same run: each iteration collects the rows once each
// way, in alternating order, so drift in the machine's speed falls on
// both alike. It reports both rates and their ratio (on/off).
func BenchmarkCollectLive(b *testing.B) {
	agent := startEpisodeAgent(b, -1, -1)
	rows := dataset.Arithmetic(2000, 1)
	var elapsed [2]time.Duration // off, on
	collect := func(on bool) {
		opts := rollout.Options{Agents: map[string]string{agentName: agent.URL},
			Output: filepath.Join(b.TempDir(), "rollouts.jsonl"), Concurrency: 8, DisableAggregation: true}
		if on {
			tr, err := live.NewTracker(live.DefaultRules(), nil)
			if err != nil {
				b.Fatal(err)
			}
			opts.Live = tr
		}
		start := time.Now()
		if _, err := rollout.Collect(context.Background(), rows, opts); err != nil {
			b.Fatal(err)
		}
		if on {
			elapsed[1] += time.Since(start)
		} else {
			elapsed[0] += time.Since(start)
		}
	}
	n := 0
	for b.Loop() {
		first := n%2 == 0
		collect(!first)
		collect(first)
		n++
	}
	off := float64(n*len(rows)) / elapsed[0].Seconds()
	on := float64(n*len(rows)) / elapsed[1].Seconds()
	b.ReportMetric(off, "off-rollouts/s")
	b.ReportMetric(on, "on-rollouts/s")
	b.ReportMetric(on/off, "on/off")
}

// The root span of a rollout's trace, the collector's /run CLIENT span,
// names the rollout as the live view does: task (nemo.gym.task.id, the
// task index), repeat and attempt, next to nemo.gym.rollout.id.
func TestCollectSpanIdentity(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	h := servertest.EnableTelemetry(t, telemetry.InitOptions{ServerName: "collector", SpanExporter: exp})
	var failedOnce atomic.Bool
	agent := startAgent(t, func(_ context.Context, c call) answer {
		if c.Task == 1 && c.Rollout == 1 && failedOnce.CompareAndSwap(false, true) {
			return answer{Status: http.StatusInternalServerError}
		}
		return answer{}
	})
	opts := options(agent, outPath(t))
	opts.NumRepeats = 2
	if sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(2, 1), opts); err != nil || sum.Succeeded != 4 {
		t.Fatalf("%+v, %v", sum, err)
	}
	if err := agent.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range exp.GetSpans() {
		if s.SpanKind != trace.SpanKindClient || servertest.Attrs(s.Attributes)[contract.AttrRolloutID] == "" {
			continue // not a /run call (/aggregate_metrics)
		}
		var repeat, attempt int64 = -1, -1
		for _, kv := range s.Attributes {
			switch string(kv.Key) {
			case contract.AttrRolloutRepeat:
				repeat = kv.Value.AsInt64()
			case contract.AttrRolloutAttempt:
				attempt = kv.Value.AsInt64()
			}
		}
		got[servertest.Attrs(s.Attributes)[contract.AttrRolloutID]] = fmt.Sprintf("task %s repeat %d attempt %d",
			servertest.Attrs(s.Attributes)[contract.AttrTaskID], repeat, attempt)
	}
	want := map[string]string{
		"0-0": "task 0 repeat 0 attempt 0", "0-1": "task 0 repeat 1 attempt 0", "1-0": "task 1 repeat 0 attempt 0",
		"1-1": "task 1 repeat 1 attempt 0", "1-1-a1": "task 1 repeat 1 attempt 1",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("CLIENT spans by rollout id: %v\nwant %v", got, want)
	}
}
