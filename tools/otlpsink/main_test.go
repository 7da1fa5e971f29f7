package main

import (
	"bytes"
	"context"
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
