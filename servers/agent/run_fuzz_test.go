package agent_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
	"github.com/gymlens/gymlens/servers/model"
	"github.com/gymlens/gymlens/servers/resources"
	"github.com/gymlens/gymlens/telemetry"
)

// runBodyLimit is the agent's body limit in the fuzz target: small, so
// the 413 path is reachable with small inputs.
const runBodyLimit = 4 << 10

// maxRunBody bounds what the fuzzer sends (see FuzzRunBody).
const maxRunBody = 64 << 10

// dropSpans is a span exporter that drops everything, so the fuzzed
// fleet records spans without the test keeping them.
type dropSpans struct{}

func (dropSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropSpans) Shutdown(context.Context) error                             { return nil }

var (
	hex16 = regexp.MustCompile(`^[0-9a-f]{16}$`)
	hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

func FuzzRunBody(f *testing.F) {
	for _, seed := range []string{
		`{"task":{"id":"add-1","question":"What is 17 + 25?","expected":"42"}}`,
		`{"task":{"id":"add-1","question":"What is 17 + 25?","expected":"42"},"rollout_id":"r-1"}`,
		`{"task":{"id":"m","question":"-3 * -4","expected":"12"},"rollout_id":"  "}`,
		`{"task":{"id":"big","question":"99999999999999999999 * 99999999999999999999","expected":"1"}}`,
		`{"task":{"id":"x","question":"no arithmetic here","expected":"7"}}`,
		`{"task":{"id":"x","question":"1 + 1","expected":"two"}}`,
		`{"task":{"id":"x","question":"1 + 1","expected":""}}`,
		`{"task":{"id":"x","question":"1 + 1","expected":"2,000"}}`,
		`{"task":{"id":"","question":"1 + 1","expected":"2"}}`,
		`{"task":{"id":"x","question":"\t","expected":"2"}}`,
		`{"task":{"id":"x","question":"1 + 1","expected":2}}`,
		`{"task":{"id":"x","question":"1 + 1","expected":"2"},"rollout_id":7}`,
		`{"task":{"id":"x","question":"1 + 1","expected":"2"}}}`,
		`{"task":{"id":"x","question":"1 + 1","expected":"2"}} []`,
		`{"task":{"id":"x","question":"` + strings.Repeat("1 + ", runBodyLimit/4) + `1","expected":"2"}}`,
		`{"task":{"id":"\u0000","question":"\ud800 2 + 2 \u2028","expected":"4"}}`,
		"{\"task\":{\"id\":\"\xff\",\"question\":\"2 + 2\",\"expected\":\"4\"},\"rollout_id\":\"\xc0\"}",
		`{"task":{"id":"x","question":"2 + 2","expected":"4"`,
		``, `null`, `{}`, `[]`, `{"task":null}`, `{"task":[]}`, `true`,
	} {
		f.Add([]byte(seed))
	}

	servertest.EnableTelemetry(f, telemetry.InitOptions{ServerName: agent.ServerName,
		ServerType: telemetry.ServerTypeAgent, SpanExporter: dropSpans{}, MetricReader: sdkmetric.NewManualReader()})
	quiet := slog.New(slog.DiscardHandler)

	ms := server.New(server.Options{Name: model.ServerName, Type: telemetry.ServerTypeModel, Logger: quiet})
	mcfg := model.Defaults() // the built-in policy, no latency
	if err := model.Register(ms, mcfg); err != nil {
		f.Fatal(err)
	}
	modelURL, _ := servertest.Start(f, ms)
	rs := server.New(server.Options{Name: resources.ServerName, Type: telemetry.ServerTypeResources, Logger: quiet})
	if err := resources.Register(rs, resources.Defaults()); err != nil {
		f.Fatal(err)
	}
	resourcesURL, _ := servertest.Start(f, rs)
	as := server.New(server.Options{Name: agent.ServerName, Type: telemetry.ServerTypeAgent,
		MaxBodyBytes: runBodyLimit, Logger: quiet})
	if err := agent.Register(as, agent.Config{ModelURL: modelURL, ResourcesURL: resourcesURL}, servertest.Client(f)); err != nil {
		f.Fatal(err)
	}
	base, _ := servertest.Start(f, as)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	f.Cleanup(func() {
		for _, u := range []string{base, modelURL, resourcesURL} {
			servertest.CheckHealth(f, client, u)
		}
		client.CloseIdleConnections()
	})

	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > maxRunBody {
			t.Skip("body too large")
		}
		// A /run body is either rejected by the runtime (400, 413) or
		// answered as a rollout: 200, whatever happened to it.
		req, want := servertest.ExpectDecode[protocol.RunRequest](body, runBodyLimit)
		status, raw := servertest.Post(t, client, base+"/run", body)
		if !slices.Contains(want, status) {
			t.Fatalf("%.200q: status %d (%s), want one of %v", body, status, raw, want)
		}
		if status != http.StatusOK {
			servertest.CheckErrorBody(t, status, raw)
			servertest.CheckHealth(t, client, base)
			return
		}

		// A rollout: the model's deterministic answer, scored by the
		// verifier; a task whose expected answer is not a number is a
		// failed rollout, still answered with 200.
		var resp protocol.RunResponse
		if err := json.Unmarshal(raw, &resp); err != nil {
			t.Fatalf("200 with a body that is not a RunResponse: %v: %s", err, raw)
		}
		bad := func(format string, args ...any) {
			t.Helper()
			t.Errorf("%.200q -> %+v: "+format, append([]any{body, resp}, args...)...)
		}
		if resp.TaskID != req.Task.ID {
			bad("task id %q, want %q", resp.TaskID, req.Task.ID)
		}
		if req.RolloutID != "" && resp.RolloutID != req.RolloutID || req.RolloutID == "" && !hex16.MatchString(resp.RolloutID) {
			bad("rollout id %q for requested %q", resp.RolloutID, req.RolloutID)
		}
		if answer := model.Answer(mcfg.Seed, mcfg.CorrectProbability, req.Task.Question); resp.Answer != answer {
			bad("answer %q, want the model's %q", resp.Answer, answer)
		}
		if !hex32.MatchString(resp.TraceID) || !(resp.DurationMS >= 0) {
			bad("trace id %q, duration %v", resp.TraceID, resp.DurationMS)
		}
		if !servertest.Scorable(req.Task.Expected) {
			if !strings.Contains(resp.Error, resources.ErrExpectedNotNumber.Error()) || resp.Reward != 0 || resp.Correct {
				bad("unscorable task should fail with %q", resources.ErrExpectedNotNumber)
			}
			return
		}
		got, found := resources.LastNumber(resp.Answer)
		wantN, _ := resources.LastNumber(strings.TrimSpace(req.Task.Expected))
		correct := found && servertest.SameNumber(got, wantN)
		if resp.Error != "" || resp.Correct != correct || resp.Reward != map[bool]float64{true: 1}[correct] {
			bad("want correct=%v without error", correct)
		}
	})
}
