package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// syncBuffer is a bytes.Buffer safe for the sink and the test at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestSinkCountsWhatItReceives(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, &stdout, &stderr) }()

	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == ""; {
		if line, ok := strings.CutPrefix(stdout.String(), ReadyPrefix); ok && strings.Contains(line, "\n") {
			addr = strings.TrimSpace(line)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready line; stdout %q stderr %q", stdout.String(), stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// Three spans in two scopes of one resource, and one more in another.
	spans := func(n int) []*tracepb.Span { return make([]*tracepb.Span, n) }
	traceReq := &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: fill(spans(2))}, {Spans: fill(spans(1))}}},
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: fill(spans(1))}}},
	}}
	for range 2 {
		if _, err := coltrace.NewTraceServiceClient(conn).Export(ctx, traceReq); err != nil {
			t.Fatalf("trace export: %v", err)
		}
	}
	// Points of every kind: 2 gauge, 1 sum, 1 histogram, 1 exponential
	// histogram, 1 summary.
	metricsReq := &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{
			{Name: "g", Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: []*metricspb.NumberDataPoint{{}, {}}}}},
			{Name: "s", Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{DataPoints: []*metricspb.NumberDataPoint{{}}}}},
			{Name: "h", Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{DataPoints: []*metricspb.HistogramDataPoint{{}}}}},
			{Name: "e", Data: &metricspb.Metric_ExponentialHistogram{ExponentialHistogram: &metricspb.ExponentialHistogram{
				DataPoints: []*metricspb.ExponentialHistogramDataPoint{{}}}}},
			{Name: "q", Data: &metricspb.Metric_Summary{Summary: &metricspb.Summary{DataPoints: []*metricspb.SummaryDataPoint{{}}}}},
		}}},
	}}}
	if _, err := colmetrics.NewMetricsServiceClient(conn).Export(ctx, metricsReq); err != nil {
		t.Fatalf("metrics export: %v", err)
	}
	logsReq := &collogs.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{}, {}, {}}}},
	}}}
	if _, err := collogs.NewLogsServiceClient(conn).Export(ctx, logsReq); err != nil {
		t.Fatalf("logs export: %v", err)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d; stderr %q", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sink did not stop after its context ended")
	}
	want := "otlpsink: spans=8 metric_points=6 log_records=3 trace_exports=2 metric_exports=1 log_exports=1\n"
	if got := stdout.String(); !strings.HasSuffix(got, want) {
		t.Errorf("stdout %q, want it to end with %q", got, want)
	}
}

func fill(s []*tracepb.Span) []*tracepb.Span {
	for i := range s {
		s[i] = &tracepb.Span{Name: "s"}
	}
	return s
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{{"extra"}, {"-every", "-1s"}, {"-nope"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("otlpsink %v: exit %d, want 2", args, code)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-addr", "127.0.0.1:99999"}, &out, &errOut); code != 1 {
		t.Errorf("unusable address: exit %d, want 1", code)
	}
}

func TestSinkRecordsEveryRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-record", path}, &stdout, &stderr) }()
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == ""; {
		if line, ok := strings.CutPrefix(stdout.String(), ReadyPrefix); ok && strings.Contains(line, "\n") {
			addr = strings.TrimSpace(line)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready line; stdout %q stderr %q", stdout.String(), stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	traceReq := &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{Name: "POST /verify", Kind: tracepb.Span_SPAN_KIND_SERVER}}}}},
	}}
	metricsReq := &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{
			{Name: "gym.verify.duration_ms", Unit: "ms", Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{
				DataPoints: []*metricspb.HistogramDataPoint{{ExplicitBounds: []float64{0, 5}}}}}},
		}}},
	}}}
	logsReq := &collogs.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{SeverityText: "INFO"}}}},
	}}}
	if _, err := coltrace.NewTraceServiceClient(conn).Export(ctx, traceReq); err != nil {
		t.Fatal(err)
	}
	if _, err := colmetrics.NewMetricsServiceClient(conn).Export(ctx, metricsReq); err != nil {
		t.Fatal(err)
	}
	if _, err := collogs.NewLogsServiceClient(conn).Export(ctx, logsReq); err != nil {
		t.Fatal(err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr.String())
	}
	if want := "otlpsink: spans=1 metric_points=1 log_records=1 trace_exports=1 metric_exports=1 log_exports=1\n"; !strings.HasSuffix(stdout.String(), want) {
		t.Errorf("stdout %q, want it to end with %q", stdout.String(), want)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines recorded, want 3:\n%s", len(lines), data)
	}
	want := []struct {
		signal string
		msg    proto.Message
		got    proto.Message
	}{
		{SignalTraces, traceReq, &coltrace.ExportTraceServiceRequest{}},
		{SignalMetrics, metricsReq, &colmetrics.ExportMetricsServiceRequest{}},
		{SignalLogs, logsReq, &collogs.ExportLogsServiceRequest{}},
	}
	for i, w := range want {
		var line struct {
			Signal  string          `json:"signal"`
			Request json.RawMessage `json:"request"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &line); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, lines[i])
		}
		if line.Signal != w.signal {
			t.Errorf("line %d: signal %q, want %q", i+1, line.Signal, w.signal)
		}
		if err := protojson.Unmarshal(line.Request, w.got); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if !proto.Equal(w.got, w.msg) {
			t.Errorf("line %d: recorded %v, sent %v", i+1, w.got, w.msg)
		}
	}
}

func TestRecordingFileMustBeCreatable(t *testing.T) {
	var out, errOut bytes.Buffer
	bad := filepath.Join(t.TempDir(), "missing", "rec.jsonl")
	if code := run(context.Background(), []string{"-record", bad}, &out, &errOut); code != 1 {
		t.Errorf("exit %d, want 1; stderr %q", code, errOut.String())
	}
}
