package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/internal/upstream"
)

// telemetryBound bounds each process of the telemetry comparison: the
// Python server's start-up (about 20 s here) and every stop.
const telemetryBound = 3 * time.Minute

// diffTraceID is the trace the first request of each side names in its
// traceparent.
const diffTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// teldiffOutput is tools/teldiff -json's output, the fields the test reads.
type teldiffOutput struct {
	Gymlens, Upstream teldiffSummary
	Rows              []struct{ Section, Item, Gymlens, Upstream, Verdict string }
}

type teldiffSummary struct {
	Resource map[string][]string
	Metrics  map[string]struct {
		Scopes, Units, Kinds, Bounds []string
		ValueTypes                   []string `json:"value_types"`
		Temporalities                []string `json:"temporalities"`
		AttrKeys                     []string `json:"attr_keys"`
		Points                       int
	}
	Spans map[string]struct {
		Kinds, Scopes []string
		AttrKeys      []string            `json:"attr_keys"`
		AttrValues    map[string][]string `json:"attr_values"`
		TraceIDs      []string            `json:"trace_ids"`
		Count         int
	}
}

// TestUpstreamTelemetrySideBySide runs what scripts/telemetry-diff.sh runs,
// on a small load: gymlens's Go string_match and nemo-gym 0.6.0's Python
// string_match with 0.6.0's telemetry functions called at 0.7.0's call
// sites (scripts/upstream/gym06_telemetry.py), the same telemetry settings,
// the same verify requests, each side recorded by tools/otlpsink -record
// and compared by tools/teldiff. It asserts what must hold: the gym.*
// metrics upstream emits have gymlens twins of the same name, unit, kind,
// value type, temporality, bucket bounds, attribute keys and scope; the
// same Prometheus series; the same SERVER span names (upstream's traced
// liveness probe aside) and gym.verify span; the same service.name and
// nemo.gym.* resource identity; both sides join a caller's traceparent.
func TestUpstreamTelemetrySideBySide(t *testing.T) {
	py := upstream.TelemetryPython(t)
	root, err := upstream.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sink, teldiff := filepath.Join(dir, "otlpsink"), filepath.Join(dir, "teldiff")
	for pkg, out := range map[string]string{"./otlpsink": sink, "./teldiff": teldiff} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Dir = filepath.Join(root, "tools")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build tools/%s: %v\n%s", pkg, err, b)
		}
	}
	site := strings.TrimSpace(string(upstream.RunWith(t, py, time.Minute,
		"import nemo_gym, os; print(os.path.dirname(os.path.dirname(nemo_gym.__file__)))", nil)))
	bodies := diffBodies(t, py)

	goSink, goSinkAddr := startRecorder(t, sink, filepath.Join(dir, "go.jsonl"))
	pySink, pySinkAddr := startRecorder(t, sink, filepath.Join(dir, "py.jsonl"))
	telemetry := func(sinkAddr string) []string {
		return []string{"NEMO_GYM_OTEL_ENABLED=1", "NEMO_GYM_OTEL_EXPORTER=otlp", "NEMO_GYM_OTEL_SPAN_GROUPS=all",
			"NEMO_GYM_OTEL_RUN_ID=teldiff", "OTEL_SERVICE_NAME=nemo-gym", "OTEL_EXPORTER_OTLP_ENDPOINT=http://" + sinkAddr,
			"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_METRIC_EXPORT_INTERVAL=500"}
	}

	goPort, pyPort := testenv.FreePort(t), testenv.FreePort(t)
	goCmd := exec.Command(gymBin, "serve", "resources_servers", "--impl", "string_match", "--name", "string_match",
		"--addr", fmt.Sprintf("127.0.0.1:%d", goPort))
	goCmd.Env = cleanEnv(telemetry(goSinkAddr)...)
	goProc := testenv.Start(t, goCmd, telemetryBound)

	pyCmd := exec.Command(py, filepath.Join(root, "scripts", "upstream", "gym06_telemetry.py"))
	pyCmd.Dir = filepath.Join(site, "resources_servers", "string_match")
	pyCmd.Env = cleanEnv(append(telemetry(pySinkAddr), "NEMO_GYM_CONFIG_PATH=string_match",
		fmt.Sprintf("NEMO_GYM_CONFIG_DICT=string_match:\n  resources_servers:\n    string_match: {entrypoint: app.py, domain: knowledge, host: 127.0.0.1, port: %d}\nhead_server: {host: 127.0.0.1, port: 1}\ndry_run: false\n", pyPort))...)
	pyCmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pyProc := testenv.Start(t, pyCmd, telemetryBound)

	client := &http.Client{Timeout: 30 * time.Second}
	for _, side := range []struct {
		name string
		proc *testenv.Proc
		port int
	}{{"gymlens", goProc, goPort}, {"upstream", pyProc, pyPort}} {
		base := fmt.Sprintf("http://127.0.0.1:%d", side.port)
		side.proc.WaitHTTP(t, base+"/")
		const requests = 4
		for i := range requests {
			want := 1 - i%2
			req, err := http.NewRequest(http.MethodPost, base+"/verify", bytes.NewReader(bodies[want]))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if i == 0 {
				req.Header.Set("traceparent", "00-"+diffTraceID+"-00f067aa0ba902b7-01")
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s: POST /verify: %v", side.name, err)
			}
			var out struct{ Reward float64 }
			err = json.NewDecoder(res.Body).Decode(&out)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusOK || out.Reward != float64(want) {
				t.Fatalf("%s: POST /verify %d: status %d, reward %v (want %d), %v", side.name, i, res.StatusCode, out.Reward, want, err)
			}
		}
	}
	time.Sleep(time.Second) // a periodic metric export or two on each side
	// Each stops on SIGTERM, flushing. Upstream's server ends with status
	// 15: uvicorn re-raises the signal it caught once it has shut down
	// (uvicorn/server.py:346), and the handler Ray installed exits with the
	// signal's number (ray/_private/worker.py:1676); the shutdown_telemetry
	// in the finally around uvicorn.run has run by then.
	for _, p := range []*testenv.Proc{goProc, pyProc, goSink, pySink} {
		if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.Wait(t); code != 0 && (p != pyProc || code != 15) {
			t.Fatalf("%s exited %d after SIGTERM:\n%s", filepath.Base(p.Cmd.Path), code, tailLines(p.Stderr.String(), 20))
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, err := exec.CommandContext(ctx, teldiff, "-json", "-trace-id", diffTraceID,
		filepath.Join(dir, "go.jsonl"), filepath.Join(dir, "py.jsonl")).Output()
	if err != nil {
		t.Fatalf("teldiff: %v", err)
	}
	var d teldiffOutput
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("teldiff -json: %v", err)
	}
	checkTelemetryDiff(t, d)
}

// checkTelemetryDiff asserts the facts of TestUpstreamTelemetrySideBySide.
func checkTelemetryDiff(t *testing.T, d teldiffOutput) {
	t.Helper()
	g, u := d.Gymlens, d.Upstream

	// gym.* metrics: upstream must have emitted its verify pair, and each of
	// its gym.* metrics must have a gymlens twin of the same shape.
	var gymMetrics []string
	for name := range u.Metrics {
		if strings.HasPrefix(name, "gym.") {
			gymMetrics = append(gymMetrics, name)
		}
	}
	slices.Sort(gymMetrics)
	for _, want := range []string{"gym.verify.duration_ms", "gym.verify.success_rate"} {
		if !slices.Contains(gymMetrics, want) {
			t.Errorf("upstream did not emit %s (its gym.* metrics: %v)", want, gymMetrics)
		}
	}
	for _, name := range gymMetrics {
		um, gm := u.Metrics[name], g.Metrics[name]
		if gm.Points == 0 {
			t.Errorf("%s: upstream emits it, gymlens does not", name)
			continue
		}
		for _, f := range []struct {
			what       string
			gymlens, u []string
		}{
			{"unit", gm.Units, um.Units}, {"kind", gm.Kinds, um.Kinds}, {"value type", gm.ValueTypes, um.ValueTypes},
			{"temporality", gm.Temporalities, um.Temporalities}, {"bucket bounds", gm.Bounds, um.Bounds},
			{"attribute keys", gm.AttrKeys, um.AttrKeys}, {"scope", gm.Scopes, um.Scopes},
		} {
			if !slices.Equal(f.gymlens, f.u) {
				t.Errorf("%s: %s %q in gymlens, %q upstream", name, f.what, f.gymlens, f.u)
			}
		}
	}
	if b := u.Metrics["gym.verify.duration_ms"].Bounds; len(b) != 1 || b[0] != "0,5,10,25,50,75,100,250,500,750,1000,2500,5000,7500,10000" {
		t.Errorf("upstream gym.verify.duration_ms bounds %q, want the SDK's 15 defaults", b)
	}
	rowsSame, rows := 0, 0
	for _, r := range d.Rows {
		rows++
		if r.Verdict == "same" {
			rowsSame++
		}
		if r.Section == "prometheus" && slices.Contains(gymMetrics, r.Item) && r.Verdict != "same" {
			t.Errorf("Prometheus series of %s: %s", r.Item, r.Verdict)
		}
	}

	// SERVER spans: the same route names (upstream also traces its liveness
	// probe GET /, which gymlens excludes on purpose).
	server := func(s teldiffSummary, skip string) []string {
		var out []string
		for name, sp := range s.Spans {
			if slices.Contains(sp.Kinds, "SERVER") && name != skip {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out
	}
	gs, us := server(g, ""), server(u, "GET /")
	if !slices.Equal(gs, us) || !slices.Contains(gs, "POST /verify") {
		t.Errorf("SERVER span names: gymlens %q, upstream %q (GET / aside); want the same, with POST /verify", gs, us)
	}
	for side, s := range map[string]teldiffSummary{"gymlens": g, "upstream": u} {
		v := s.Spans["gym.verify"]
		if v.Count != 4 || !slices.Equal(v.Kinds, []string{"INTERNAL"}) || !slices.Equal(v.AttrValues["nemo.gym.server.name"], []string{"string_match"}) {
			t.Errorf("%s gym.verify spans: %d, kinds %q, nemo.gym.server.name %q; want 4 INTERNAL on string_match",
				side, v.Count, v.Kinds, v.AttrValues["nemo.gym.server.name"])
		}
		for _, name := range []string{"POST /verify", "gym.verify"} {
			if !slices.Contains(s.Spans[name].TraceIDs, diffTraceID) {
				t.Errorf("%s: no %s span joined the traceparent's trace", side, name)
			}
		}
		if n := s.Spans["POST /verify"].Count; n != 4 {
			t.Errorf("%s: %d POST /verify spans, want 4", side, n)
		}
	}

	// Resource identity: service.name is <OTEL_SERVICE_NAME>/<server name>
	// on both sides, with the same nemo.gym.* keys.
	for _, key := range []string{"service.name", "nemo.gym.service_group", "nemo.gym.server.name", "nemo.gym.server.type", "dl.rank", "dl.world_size"} {
		if !slices.Equal(g.Resource[key], u.Resource[key]) || len(u.Resource[key]) != 1 {
			t.Errorf("resource %s: gymlens %q, upstream %q; want one equal value", key, g.Resource[key], u.Resource[key])
		}
	}
	if got := u.Resource["service.name"]; len(got) != 1 || got[0] != "nemo-gym/string_match" {
		t.Errorf("service.name %q, want nemo-gym/string_match", got)
	}
	t.Logf("%d gym.* metrics of upstream's checked (%v); %d table rows, %d same", len(gymMetrics), gymMetrics, rows, rowsSame)
}

// diffBodies returns the two /verify bodies, made by upstream's own
// StringMatchVerifyRequest model_dump: [0] is rewarded 0, [1] rewarded 1.
func diffBodies(t *testing.T, py string) [2][]byte {
	t.Helper()
	const program = `
import json
from resources_servers.string_match.app import StringMatchVerifyRequest
for expected in ("41", "42"):
    req = StringMatchVerifyRequest.model_validate({
        "responses_create_params": {"input": [{"role": "user", "content": "What is 17 + 25? Put the answer in \\boxed{}."}]},
        "response": {"id": "resp_1", "object": "response", "created_at": 1767225600, "model": "gym-policy",
                     "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                                 "content": [{"type": "output_text", "text": "17 + 25 = 42, so the answer is \\boxed{42}.", "annotations": []}]}],
                     "parallel_tool_calls": True, "tool_choice": "auto", "tools": []},
        "expected_answer": expected, "extraction_mode": "boxed"})
    print(json.dumps(req.model_dump(mode="json")))
`
	lines := strings.Split(strings.TrimSpace(string(upstream.RunWith(t, py, time.Minute, program, nil))), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 bodies, got %d lines", len(lines))
	}
	return [2][]byte{[]byte(lines[0]), []byte(lines[1])}
}

// startRecorder starts tools/otlpsink recording to path and returns it
// with its address once it listens.
func startRecorder(t *testing.T, bin, path string) (*testenv.Proc, string) {
	t.Helper()
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-record", path)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = pw
	p := testenv.Start(t, cmd, 30*time.Second)
	pw.Close()
	t.Cleanup(func() { pr.Close() })
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatalf("otlpsink printed no ready line: %v", sc.Err())
	}
	addr, ok := strings.CutPrefix(sc.Text(), "OTLPSINK_READY ")
	if !ok {
		t.Fatalf("otlpsink: %q", sc.Text())
	}
	go func() {
		for sc.Scan() { // keep the pipe drained: it prints its totals at exit
		}
	}()
	return p, addr
}
