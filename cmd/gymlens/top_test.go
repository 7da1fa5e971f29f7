package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/live"
)

// statusOf serves a tracker of a small run, two rollouts in flight (one
// long stalled), one done, one queued, on a real status listener that
// wants token.
func statusOf(t *testing.T, token string) string {
	t.Helper()
	now := time.Now()
	clock := func() time.Time { return now }
	tr, err := live.NewTracker(live.Rules{SlowFactor: 3, StallFactor: 10, SlowFloor: time.Second, StallFloor: 2 * time.Second}, func() time.Time { return clock() })
	if err != nil {
		t.Fatal(err)
	}
	tr.SetRunID("run-top-1")
	tr.Queue("simple_agent", 4)
	tr.Start(live.Identity{TaskIndex: 3, RolloutID: "3-0", Agent: "simple_agent"})
	now = now.Add(time.Minute) // task 3 has made no progress for a minute
	tr.Start(live.Identity{TaskIndex: 4, RolloutID: "4-0", Agent: "simple_agent"})
	tr.Start(live.Identity{TaskIndex: 5, RolloutID: "5-0", Agent: "simple_agent"}).Finish(live.Done, 200, "")
	board := &live.Board{}
	board.Show(tr)
	st, err := listenStatus("127.0.0.1:0", token, board)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.close)
	return st.base
}

func TestTopOnce(t *testing.T) {
	const token = "top-test-token-5a1c9e7f"
	base := statusOf(t, token)
	t.Setenv(contract.EnvHeadToken, token)

	code, out, errOut := runGym(t, "top", "--once", "--head", base)
	if code != 0 {
		t.Fatalf("gymlens top --once: exit %d\n%s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	for _, want := range []string{
		"gymlens top  run run-top-1  running",
		"rollouts 1/4  done 1  failed 0  cancelled 0  |  active 1  slow 0  retrying 0  stalled 1  |  queued 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("frame lacks %q:\n%s", want, out)
		}
	}
	// The agent's row, then the rollouts, stalled first.
	var stalledAt, activeAt int
	for i, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && f[0] == "simple_agent" && (len(f) < 3 || f[1] != "2" || f[2] != "1" || f[3] != "1"):
			t.Errorf("agent row %q: want 2 in flight, 1 queued, 1 done", l)
		case len(f) > 4 && f[0] == "stalled":
			stalledAt = i
			if f[1] != "3" || f[4] != "3-0" {
				t.Errorf("stalled row %q: want task 3, rollout 3-0", l)
			}
		case len(f) > 4 && f[0] == "active":
			activeAt = i
			if f[4] != "4-0" {
				t.Errorf("active row %q: want rollout 4-0", l)
			}
		}
	}
	if stalledAt == 0 || activeAt == 0 || stalledAt > activeAt {
		t.Errorf("want the stalled rollout listed before the active one:\n%s", out)
	}

	// --json: the status API's snapshot, the state a word of the states.
	code, out, errOut = runGym(t, "top", "--once", "--json", "--state", "stalled", "--head", base)
	if code != 0 {
		t.Fatalf("gymlens top --once --json: exit %d\n%s", code, errOut)
	}
	var snap live.Snapshot
	if err := json.Unmarshal([]byte(out), &snap); err != nil {
		t.Fatalf("--json printed no snapshot: %v\n%s", err, out)
	}
	if snap.RunID != "run-top-1" || len(snap.Rollouts) != 1 || snap.Rollouts[0].State != live.Stalled || snap.Counts.Stalled != 1 {
		t.Errorf("--json --state stalled: %s", out)
	}

	// Without the token: the listener refuses, top says what it wants.
	t.Setenv(contract.EnvHeadToken, "")
	code, _, errOut = runGym(t, "top", "--once", "--head", base)
	if code != 1 || !strings.Contains(errOut, "head token") {
		t.Errorf("gymlens top without the token: exit %d, %q; want 1 naming the token", code, errOut)
	}
}

func TestTopUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"top"},
		{"top", "--head", "ftp://x"},
		{"top", "--head", "http://127.0.0.1:1", "--state", "sleeping"},
		{"top", "--head", "http://127.0.0.1:1", "--interval", "0s"},
		{"top", "--head", "http://127.0.0.1:1", "--limit", "-1"},
		{"top", "--head", "http://127.0.0.1:1", "--head-token-file", "/nonexistent/token"},
	} {
		if code, _, errOut := runGym(t, args...); code != exitUsage {
			t.Errorf("gymlens %v: exit %d, want %d\n%s", args, code, exitUsage, errOut)
		}
	}
}

// A status listener off loopback needs a token; and the live rules'
// flags are checked before anything starts.
func TestCollectLiveUsageErrors(t *testing.T) {
	in := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(in, []byte(`{"responses_create_params":{"input":"What is 1 + 1?"},"expected_answer":"2"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"rollouts", "collect", "-i", in, "-o", t.TempDir() + "/o.jsonl", "--agent-url", "http://127.0.0.1:1", "--status-addr", "0.0.0.0:0"},
		{"rollouts", "collect", "-i", in, "-o", t.TempDir() + "/o.jsonl", "--agent-url", "http://127.0.0.1:1", "--status-addr", "127.0.0.1:bad"},
		{"rollouts", "collect", "-i", in, "-o", t.TempDir() + "/o.jsonl", "--agent-url", "http://127.0.0.1:1", "--stall-factor", "0.5"},
		{"run", "--slow-floor", "0s"},
		{"run", "--jaeger-url", "jaeger:16686"},
	} {
		code, _, errOut := runGym(t, args...)
		if code != exitUsage || !strings.Contains(errOut, "--s") && !strings.Contains(errOut, "--jaeger-url") {
			t.Errorf("gymlens %v: exit %d, want %d naming the flag\n%s", args, code, exitUsage, errOut)
		}
	}
}
