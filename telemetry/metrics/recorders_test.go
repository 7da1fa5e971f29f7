package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// scoped collects r and returns the metrics of each scope by name.
func scoped(t *testing.T, r *sdkmetric.ManualReader) map[string]map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := map[string]map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if out[sm.Scope.Name] == nil {
			out[sm.Scope.Name] = map[string]metricdata.Metrics{}
		}
		for _, m := range sm.Metrics {
			out[sm.Scope.Name][m.Name] = m
		}
	}
	return out
}

// exampleCall is a GenAI call with every attribute set.
var exampleCall = metrics.GenAICall{
	Operation: contract.GenAIOperationChat, Provider: "openai", RequestModel: "m-req", ResponseModel: "m-resp",
	ServerAddress: "127.0.0.1", ServerPort: 8000, Duration: 1500 * time.Millisecond, InputTokens: 12, OutputTokens: 30,
}

// recordEveryRecorder records through every recorder once (twice for the
// model call, once with an unknown first byte), with every attribute set.
func recordEveryRecorder(t *testing.T) {
	t.Helper()
	metrics.RecordRollout(30*time.Millisecond, true)
	metrics.RecordVerify(7*time.Millisecond, true)
	if err := metrics.RecordActiveServers(3); err != nil {
		t.Fatal(err)
	}
	metrics.RecordModelCall(contract.DialectResponses, "policy_model", 120*time.Millisecond, 40*time.Millisecond)
	metrics.RecordModelCall(contract.DialectResponses, "policy_model", 80*time.Millisecond, -1)
	metrics.RecordHTTPTimeout(true)
	metrics.RecordHTTPRetry(contract.RetryServerDisconnected)
	metrics.RecordAgentTurns("simple_agent", 3)
	metrics.RecordAgentTurn("simple_agent", 250*time.Millisecond)
	metrics.RecordToolCall("get_weather", "weather", 9*time.Millisecond)
	failed := exampleCall
	failed.ErrorType = "500"
	metrics.RecordGenAI(failed)
	l := metrics.NewLimiter("test_catalogue", 2)
	if err := l.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Acquire(ctx); err == nil {
		t.Fatal("Acquire with an ended context succeeded")
	}
	t.Cleanup(func() { l.Release(); runtime.KeepAlive(l) })
}

// pointKeys returns the sorted attribute keys of every point of m.
func pointKeys(t *testing.T, m metricdata.Metrics) [][]string {
	t.Helper()
	var sets []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	default:
		t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
	}
	var out [][]string
	for _, s := range sets {
		var keys []string
		for _, kv := range s.ToSlice() {
			keys = append(keys, string(kv.Key))
		}
		out = append(out, keys)
	}
	return out
}

// checkKind fails unless m's data is what the contract's kind exports.
func checkKind(t *testing.T, in contract.Instrument, m metricdata.Metrics) {
	t.Helper()
	ok := false
	switch in.Kind {
	case contract.Histogram:
		if in.Float {
			h, isH := m.Data.(metricdata.Histogram[float64])
			ok = isH
			if isH {
				want := in.Boundaries
				if want == nil {
					want = contract.DefaultBucketsMS
				}
				for _, p := range h.DataPoints {
					if !slices.Equal(p.Bounds, want) {
						t.Errorf("%s bounds %v, want %v", in.Name, p.Bounds, want)
					}
				}
			}
		} else {
			h, isH := m.Data.(metricdata.Histogram[int64])
			ok = isH
			if isH {
				for _, p := range h.DataPoints {
					if !slices.Equal(p.Bounds, in.Boundaries) {
						t.Errorf("%s bounds %v, want %v", in.Name, p.Bounds, in.Boundaries)
					}
				}
			}
		}
	case contract.Counter:
		s, isS := m.Data.(metricdata.Sum[int64])
		ok = isS && s.IsMonotonic && !in.Float
	case contract.UpDownCounter:
		s, isS := m.Data.(metricdata.Sum[int64])
		ok = isS && !s.IsMonotonic && !in.Float
	case contract.Gauge:
		if in.Float {
			_, ok = m.Data.(metricdata.Gauge[float64])
		} else {
			_, ok = m.Data.(metricdata.Gauge[int64])
		}
	}
	if !ok {
		t.Errorf("%s exports %T, want a %s (float %v)", in.Name, m.Data, in.Kind, in.Float)
	}
}

// Every instrument of the catalogue a recorder of this package feeds is
// exported as the contract says: name, kind, unit, description, bucket
// boundaries, attribute keys and the meter's scope.
func TestCatalogueAsExported(t *testing.T) {
	reader := initMetrics(t, contract.ServerTypeOrchestrator)
	recordEveryRecorder(t)
	byScope := scoped(t, reader)
	ours := byScope[contract.MeterScope]
	if ours == nil {
		var scopes []string
		for s := range byScope {
			scopes = append(scopes, s)
		}
		t.Fatalf("no metrics in scope %q; scopes %v", contract.MeterScope, scopes)
	}
	for _, in := range contract.Instruments() {
		switch in.Name {
		case contract.ServerRequestDuration, contract.HTTPServerRequestDuration,
			contract.HTTPServerActiveRequests, contract.HTTPServerDurationOld,
			contract.HTTPServerRequestBodySize, contract.HTTPServerResponseBodySize,
			contract.HTTPClientRequestBodySize, contract.HTTPClientResponseBodySize:
			continue // never recorded / recorded by the HTTP instrumentation
		case contract.ProcessTreeMemoryUsed, contract.ProcessTreeCPUPercent:
			if runtime.GOOS != "linux" {
				continue // registered on Linux only
			}
		}
		t.Run(in.Name, func(t *testing.T) {
			m, ok := ours[in.Name]
			if !ok {
				for scope, ms := range byScope {
					if _, elsewhere := ms[in.Name]; elsewhere {
						t.Fatalf("exported in scope %q, want %q", scope, contract.MeterScope)
					}
				}
				t.Fatalf("not exported")
			}
			if m.Unit != in.Unit {
				t.Errorf("unit %q, want %q", m.Unit, in.Unit)
			}
			if m.Description != in.Description {
				t.Errorf("description %q, want %q", m.Description, in.Description)
			}
			checkKind(t, in, m)
			want := slices.Clone(in.Attrs)
			slices.Sort(want)
			keys := pointKeys(t, m)
			if len(keys) == 0 {
				t.Fatal("no points")
			}
			for _, k := range keys {
				if !slices.Equal(k, want) {
					t.Errorf("point attribute keys %v, want %v", k, want)
				}
			}
		})
	}
}

func TestRecorderValues(t *testing.T) {
	reader := initMetrics(t, contract.ServerTypeOrchestrator)
	recordEveryRecorder(t)
	metrics.RecordHTTPRetry("something else") // folded into other
	metrics.RecordHTTPTimeout(false)
	metrics.RecordHTTPTimeout(false)
	metrics.RecordRollout(time.Millisecond, false)
	got := scoped(t, reader)[contract.MeterScope]

	model := histogram(t, got[contract.ModelCallDuration])
	if model.Count != 2 || model.Sum != 200 {
		t.Errorf("model call count %d sum %v, want 2 and 200", model.Count, model.Sum)
	}
	for key, want := range map[string]string{contract.AttrModelDialect: contract.DialectResponses, contract.AttrServerName: "policy_model"} {
		if v, _ := model.Attributes.Value(attribute.Key(key)); v.AsString() != want {
			t.Errorf("model call %s = %q, want %q", key, v.AsString(), want)
		}
	}
	if ttfb := histogram(t, got[contract.ModelTimeToFirstByte]); ttfb.Count != 1 || ttfb.Sum != 40 {
		t.Errorf("time to first byte count %d sum %v: the unknown one must not be recorded", ttfb.Count, ttfb.Sum)
	}
	if c := counterByOutcome(t, got[contract.HTTPRetries], contract.AttrHTTPRetryReason); c[contract.RetryServerDisconnected] != 1 || c[contract.RetryOther] != 1 || len(c) != 2 {
		t.Errorf("retries %v", c)
	}
	timeouts := map[bool]int64{}
	for _, p := range got[contract.HTTPTimeouts].Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := p.Attributes.Value(attribute.Key(contract.AttrHTTPInternal))
		if v.Type() != attribute.BOOL {
			t.Errorf("%s is %s, want a bool", contract.AttrHTTPInternal, v.Type())
		}
		timeouts[v.AsBool()] = p.Value
	}
	if timeouts[true] != 1 || timeouts[false] != 2 {
		t.Errorf("timeouts %v, want internal 1, external 2", timeouts)
	}
	if c := counterByOutcome(t, got[contract.RolloutCompleted], contract.AttrRolloutOutcome); c[contract.OutcomeSuccess] != 1 || c[contract.OutcomeFailure] != 1 {
		t.Errorf("rollouts completed %v", c)
	}
	if p := histogram(t, got[contract.AgentTurnCount]); p.Count != 1 || p.Sum != 3 {
		t.Errorf("turn count %+v", p)
	}
	if p := histogram(t, got[contract.AgentTurnDuration]); p.Count != 1 || p.Sum != 250 {
		t.Errorf("turn duration %+v", p)
	}
	tool := histogram(t, got[contract.ToolCallDuration])
	if v, _ := tool.Attributes.Value(attribute.Key(contract.AttrToolName)); tool.Sum != 9 || v.AsString() != "get_weather" {
		t.Errorf("tool call %+v", tool)
	}
	gen := histogram(t, got[contract.GenAIOperationDuration])
	if gen.Sum != 1.5 {
		t.Errorf("gen_ai duration sum %v s, want 1.5", gen.Sum)
	}
	if v, _ := gen.Attributes.Value(attribute.Key(contract.AttrErrorType)); v.AsString() != "500" {
		t.Errorf("gen_ai error.type %q", v.AsString())
	}
	if v, _ := gen.Attributes.Value(attribute.Key(contract.AttrServerPort)); v.AsInt64() != 8000 {
		t.Errorf("gen_ai server.port %v", v)
	}
	tokens := map[string]int64{}
	for _, p := range got[contract.GenAITokenUsage].Data.(metricdata.Histogram[int64]).DataPoints {
		v, _ := p.Attributes.Value(attribute.Key(contract.AttrGenAITokenType))
		tokens[v.AsString()] = p.Sum
	}
	if tokens[contract.GenAITokenTypeInput] != 12 || tokens[contract.GenAITokenTypeOutput] != 30 {
		t.Errorf("tokens %v", tokens)
	}
}

// Bad input records nothing: negative durations and counts, and unknown
// token counts.
func TestRecordersDropBadInput(t *testing.T) {
	reader := initMetrics(t, contract.ServerTypeAgent)
	metrics.RecordModelCall(contract.DialectResponses, "m", -time.Millisecond, time.Millisecond)
	metrics.RecordAgentTurns("a", -1)
	metrics.RecordAgentTurn("a", -time.Second)
	metrics.RecordToolCall("t", "s", -1)
	metrics.RecordGenAI(metrics.GenAICall{Duration: -1, InputTokens: 1, OutputTokens: 1})
	metrics.RecordGenAI(metrics.GenAICall{Operation: "chat", Duration: time.Second, InputTokens: -1, OutputTokens: -1})
	got := scoped(t, reader)[contract.MeterScope]
	for _, name := range []string{contract.ModelCallDuration, contract.ModelTimeToFirstByte, contract.AgentTurnCount,
		contract.AgentTurnDuration, contract.ToolCallDuration, contract.GenAITokenUsage} {
		if _, ok := got[name]; ok {
			t.Errorf("%s recorded from bad input", name)
		}
	}
	// The call with unknown tokens still has its duration, and empty
	// attributes are left out.
	gen := histogram(t, got[contract.GenAIOperationDuration])
	if gen.Count != 1 || gen.Attributes.Len() != 1 {
		t.Errorf("gen_ai duration %+v, want one point with only the operation", gen)
	}
}

// Past 64 distinct values a recorder records under _OTHER.
func TestCardinalityCap(t *testing.T) {
	reader := initMetrics(t, contract.ServerTypeAgent)
	const distinct = 70
	for i := range distinct {
		metrics.RecordAgentTurn(fmt.Sprintf("cap_agent_%03d", i), time.Millisecond)
	}
	metrics.RecordAgentTurn("cap_agent_000", time.Millisecond) // an early one keeps its own series
	got := scoped(t, reader)[contract.MeterScope]
	h := got[contract.AgentTurnDuration].Data.(metricdata.Histogram[float64])
	series := map[string]uint64{}
	for _, p := range h.DataPoints {
		v, _ := p.Attributes.Value(attribute.Key(contract.AttrAgentName))
		series[v.AsString()] = p.Count
	}
	// Other tests of this process may have used the agent cache first, so
	// count the series this test made.
	var own int
	for name := range series {
		if len(name) == len("cap_agent_000") && name[:10] == "cap_agent_" {
			own++
		}
	}
	if own > 64 || series[contract.Other] == 0 || len(series) > 65 {
		t.Fatalf("%d own series, %d in all, %d under %s; want at most 64 named and the rest folded",
			own, len(series), series[contract.Other], contract.Other)
	}
	if series["cap_agent_000"] != 2 {
		t.Errorf("cap_agent_000 count %d, want 2", series["cap_agent_000"])
	}
	var total uint64
	for _, c := range series {
		total += c
	}
	if total != distinct+1 {
		t.Errorf("%d recorded, want %d: folding lost some", total, distinct+1)
	}
}

// The limiter is a real semaphore with telemetry off.
func TestLimiterWithTelemetryOff(t *testing.T) {
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	l := metrics.NewLimiter("test_off", 3)
	var mu sync.Mutex
	inFlight, peak := 0, 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := l.Acquire(context.Background()); err != nil {
				t.Error(err)
				return
			}
			defer l.Release()
			mu.Lock()
			inFlight++
			peak = max(peak, inFlight)
			mu.Unlock()
			runtime.Gosched()
			mu.Lock()
			inFlight--
			mu.Unlock()
		})
	}
	wg.Wait()
	if peak > 3 || peak < 1 {
		t.Fatalf("peak %d in flight through a limiter of 3", peak)
	}
	// Full: a cancelled wait returns the context's error and no slot.
	for range 3 {
		if err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { errc <- l.Acquire(ctx) }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire: %v", err)
	}
	for range 3 {
		l.Release()
	}
	l.Release() // one too many: ignored
	for range 3 {
		if err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// With telemetry on the limiter's gauges move in step, each admission
// records its queue wait, and a cancelled wait is counted.
func TestLimiterMetrics(t *testing.T) {
	reader := initMetrics(t, contract.ServerTypeAgent)
	const site = "test_limiter_metrics"
	l := metrics.NewLimiter(site, 2)
	siteSet := attribute.NewSet(attribute.String(contract.AttrConcurrencySite, site))
	value := func(got map[string]metricdata.Metrics, name string) (int64, bool) {
		switch d := got[name].Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				if p.Attributes.Equals(&siteSet) {
					return p.Value, true
				}
			}
		case metricdata.Gauge[int64]:
			for _, p := range d.DataPoints {
				if p.Attributes.Equals(&siteSet) {
					return p.Value, true
				}
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				if p.Attributes.Equals(&siteSet) {
					return int64(p.Count), true
				}
			}
		}
		return 0, false
	}
	expect := func(step string, want map[string]int64) {
		t.Helper()
		got := scoped(t, reader)[contract.MeterScope]
		for name, w := range want {
			if v, ok := value(got, name); !ok || v != w {
				t.Errorf("%s: %s = %d (%v), want %d", step, name, v, ok, w)
			}
		}
	}
	expect("idle", map[string]int64{contract.ConcurrencyLimit: 2, contract.ConcurrencyActive: 0,
		contract.ConcurrencyAvailable: 2, contract.ConcurrencyQueueDepth: 0})
	for range 2 {
		if err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	expect("full", map[string]int64{contract.ConcurrencyActive: 2, contract.ConcurrencyAvailable: 0,
		contract.ConcurrencyQueueWait: 2})

	ctx, cancel := context.WithCancel(context.Background())
	waiter := make(chan error)
	go func() { waiter <- l.Acquire(ctx) }()
	for {
		got := scoped(t, reader)[contract.MeterScope]
		if d, _ := value(got, contract.ConcurrencyQueueDepth); d == 1 {
			break
		}
		runtime.Gosched()
	}
	cancel()
	if err := <-waiter; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire: %v", err)
	}
	expect("cancelled", map[string]int64{contract.ConcurrencyQueueDepth: 0, contract.ConcurrencyAdmissionCanc: 1,
		contract.ConcurrencyQueueWait: 2, contract.ConcurrencyActive: 2})

	go func() { waiter <- l.Acquire(context.Background()) }()
	for {
		got := scoped(t, reader)[contract.MeterScope]
		if d, _ := value(got, contract.ConcurrencyQueueDepth); d == 1 {
			break
		}
		runtime.Gosched()
	}
	l.Release()
	if err := <-waiter; err != nil {
		t.Fatal(err)
	}
	expect("handed over", map[string]int64{contract.ConcurrencyQueueDepth: 0, contract.ConcurrencyActive: 2,
		contract.ConcurrencyQueueWait: 3})
	l.Release()
	l.Release()
	expect("drained", map[string]int64{contract.ConcurrencyActive: 0, contract.ConcurrencyAvailable: 2})
	runtime.KeepAlive(l)
}

// Every recorder allocates nothing per call with a real SDK pipeline on
// (after its first call has built the attribute set).
func TestRecordersAllocateNothing(t *testing.T) {
	initMetrics(t, contract.ServerTypeOrchestrator)
	l := metrics.NewLimiter("test_allocs", 4)
	ctx := context.Background()
	for name, fn := range map[string]func(){
		"RecordRollout": func() { metrics.RecordRollout(time.Millisecond, true) },
		"RecordVerify":  func() { metrics.RecordVerify(time.Millisecond, false) },
		"RecordModelCall": func() {
			metrics.RecordModelCall(contract.DialectChatCompletions, "policy_model", time.Second, time.Millisecond)
		},
		"RecordHTTPTimeout":   func() { metrics.RecordHTTPTimeout(true) },
		"RecordHTTPRetry":     func() { metrics.RecordHTTPRetry(contract.RetryTimeout) },
		"RecordAgentTurns":    func() { metrics.RecordAgentTurns("simple_agent", 4) },
		"RecordAgentTurn":     func() { metrics.RecordAgentTurn("simple_agent", time.Millisecond) },
		"RecordToolCall":      func() { metrics.RecordToolCall("search", "tools", time.Millisecond) },
		"RecordGenAI":         func() { metrics.RecordGenAI(exampleCall) },
		"Limiter":             func() { _ = l.Acquire(ctx); l.Release() },
		"RecordActiveServers": func() { _ = metrics.RecordActiveServers(2) },
	} {
		fn() // the first call builds the attribute set
		if n := testing.AllocsPerRun(200, fn); n != 0 {
			t.Errorf("%s: %v allocs per call, want 0", name, n)
		}
	}
	runtime.KeepAlive(l)
}
