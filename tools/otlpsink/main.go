// Command otlpsink is an OTLP/gRPC receiver that keeps nothing. It accepts
// trace, metric and log exports on one loopback address, counts the spans,
// metric data points and log records they carry, answers success and
// forgets them. Load scripts (scripts/bench-http.sh) point the server under
// test at it, so that the server pays for exporting over a real gRPC
// connection while the receiving side costs as little CPU as possible, and
// the counts show that each variant exported what it should.
//
// With -record FILE it also keeps what it receives: every export request is
// written to FILE as one line of JSON, {"signal":"traces"|"metrics"|"logs",
// "request":<the request in protojson>}, in the order the requests arrived
// (tools/teldiff reads such recordings).
//
// Usage:
//
//	otlpsink [-addr 127.0.0.1:0] [-every 0] [-record FILE]
//
// Once listening it prints one line to stdout,
//
//	OTLPSINK_READY 127.0.0.1:PORT
//
// and on SIGINT or SIGTERM it stops and prints the totals:
//
//	otlpsink: spans=N metric_points=N log_records=N trace_exports=N metric_exports=N log_exports=N
//
// With -every set to a duration it also prints that line at that interval.
// Exit status: 0 after a clean stop, 1 when it cannot listen or serve or
// create the recording, 2 for bad flags. A request that cannot be recorded
// is refused with an error, so the exporter reports it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed exports
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// ReadyPrefix starts the line printed once the sink listens.
const ReadyPrefix = "OTLPSINK_READY "

// maxMessageBytes bounds one export request; the gRPC default of 4 MiB is
// close to what a large span batch can reach.
const maxMessageBytes = 64 << 20

// stopGrace bounds the wait for exports in flight at shutdown.
const stopGrace = 2 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command: it serves until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("otlpsink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address for OTLP over gRPC")
	every := fs.Duration("every", 0, "also print the counts at this interval (0: only at exit)")
	record := fs.String("record", "", "also write every export request to this file, one protojson line each")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *every < 0 {
		fmt.Fprintln(stderr, "usage: otlpsink [-addr HOST:PORT] [-every DURATION] [-record FILE]")
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "otlpsink: listen %s: %v\n", *addr, err)
		return 1
	}
	var rec *recorder
	if *record != "" {
		f, err := os.Create(*record)
		if err != nil {
			ln.Close()
			fmt.Fprintf(stderr, "otlpsink: %v\n", err)
			return 1
		}
		rec = &recorder{f: f}
		defer func() {
			if err := rec.close(); err != nil {
				fmt.Fprintf(stderr, "otlpsink: recording: %v\n", err)
			}
		}()
	}
	var c counts
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxMessageBytes))
	coltrace.RegisterTraceServiceServer(srv, traceService{c: &c, rec: rec})
	colmetrics.RegisterMetricsServiceServer(srv, metricsService{c: &c, rec: rec})
	collogs.RegisterLogsServiceServer(srv, logsService{c: &c, rec: rec})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "%s%s\n", ReadyPrefix, ln.Addr())

	var tick <-chan time.Time
	if *every > 0 {
		t := time.NewTicker(*every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case err := <-errc:
			fmt.Fprintf(stderr, "otlpsink: serve: %v\n", err)
			fmt.Fprintln(stdout, c.String())
			return 1
		case <-tick:
			fmt.Fprintln(stdout, c.String())
		case <-ctx.Done():
			stopServer(srv)
			<-errc
			fmt.Fprintln(stdout, c.String())
			return 0
		}
	}
}

// stopServer lets exports in flight finish for up to stopGrace, then cuts
// every connection.
func stopServer(srv *grpc.Server) {
	done := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stopGrace):
		srv.Stop()
		<-done
	}
}

// counts are the totals received so far.
type counts struct {
	spans, points, logs                      atomic.Int64
	traceExports, metricExports, logsExports atomic.Int64
}

// String is the totals line.
func (c *counts) String() string {
	return fmt.Sprintf("otlpsink: spans=%d metric_points=%d log_records=%d trace_exports=%d metric_exports=%d log_exports=%d",
		c.spans.Load(), c.points.Load(), c.logs.Load(), c.traceExports.Load(), c.metricExports.Load(), c.logsExports.Load())
}

type traceService struct {
	coltrace.UnimplementedTraceServiceServer
	c   *counts
	rec *recorder
}

// Export counts the spans of one request.
func (s traceService) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	if err := s.rec.write(SignalTraces, req); err != nil {
		return nil, err
	}
	var n int64
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += int64(len(ss.GetSpans()))
		}
	}
	s.c.spans.Add(n)
	s.c.traceExports.Add(1)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

type metricsService struct {
	colmetrics.UnimplementedMetricsServiceServer
	c   *counts
	rec *recorder
}

// Export counts the data points of one request, of every metric kind.
func (s metricsService) Export(_ context.Context, req *colmetrics.ExportMetricsServiceRequest) (*colmetrics.ExportMetricsServiceResponse, error) {
	if err := s.rec.write(SignalMetrics, req); err != nil {
		return nil, err
	}
	var n int64
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				n += int64(dataPoints(m))
			}
		}
	}
	s.c.points.Add(n)
	s.c.metricExports.Add(1)
	return &colmetrics.ExportMetricsServiceResponse{}, nil
}

// dataPoints is the number of points one metric carries.
func dataPoints(m *metricspb.Metric) int {
	switch d := m.GetData().(type) {
	case *metricspb.Metric_Gauge:
		return len(d.Gauge.GetDataPoints())
	case *metricspb.Metric_Sum:
		return len(d.Sum.GetDataPoints())
	case *metricspb.Metric_Histogram:
		return len(d.Histogram.GetDataPoints())
	case *metricspb.Metric_ExponentialHistogram:
		return len(d.ExponentialHistogram.GetDataPoints())
	case *metricspb.Metric_Summary:
		return len(d.Summary.GetDataPoints())
	}
	return 0
}

type logsService struct {
	collogs.UnimplementedLogsServiceServer
	c   *counts
	rec *recorder
}

// Export counts the log records of one request.
func (s logsService) Export(_ context.Context, req *collogs.ExportLogsServiceRequest) (*collogs.ExportLogsServiceResponse, error) {
	if err := s.rec.write(SignalLogs, req); err != nil {
		return nil, err
	}
	var n int64
	for _, rl := range req.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			n += int64(len(sl.GetLogRecords()))
		}
	}
	s.c.logs.Add(n)
	s.c.logsExports.Add(1)
	return &collogs.ExportLogsServiceResponse{}, nil
}

// The signal names of a recording line.
const (
	SignalTraces  = "traces"
	SignalMetrics = "metrics"
	SignalLogs    = "logs"
)

// recorder writes export requests to a file, one JSON line each. A nil
// recorder records nothing.
type recorder struct {
	mu  sync.Mutex
	f   *os.File
	err error // the first write error; later writes are refused
}

// write appends one line for req. Its error is a gRPC status, for the
// exporter that sent req.
func (r *recorder) write(signal string, req proto.Message) error {
	if r == nil {
		return nil
	}
	body, err := protojson.Marshal(req)
	if err != nil {
		return status.Errorf(codes.Internal, "otlpsink: encode the %s request: %v", signal, err)
	}
	line := make([]byte, 0, len(body)+40)
	line = fmt.Appendf(line, `{"signal":%q,"request":`, signal)
	line = append(line, body...)
	line = append(line, "}\n"...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		_, r.err = r.f.Write(line)
	}
	if r.err != nil {
		return status.Errorf(codes.Unavailable, "otlpsink: record: %v", r.err)
	}
	return nil
}

// close closes the file, returning the first error of any write or of
// the close.
func (r *recorder) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.f.Close(); err != nil && r.err == nil {
		r.err = err
	}
	if r.err != nil {
		return fmt.Errorf("%s: %w", r.f.Name(), r.err)
	}
	return nil
}
