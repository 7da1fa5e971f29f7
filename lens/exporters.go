package lens

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/internal/fileexport"
)

// exporterSet builds the exporters named in the configuration, one signal
// at a time, sharing the console and file sinks between signals. Everything
// it opens is registered in closers.
type exporterSet struct {
	cfg      Config
	opts     Options
	res      *resource.Resource
	closers  *[]func(context.Context) error
	console  *fileexport.Sink
	file     *fileexport.Sink
	promAddr string
	// producer, when set, is lens's own aggregation (aggregate.go): every
	// metric reader built here collects it besides the SDK's instruments.
	producer sdkmetric.Producer
	// metricCounts are the push metric exporters built, each counting its
	// data points (the prometheus endpoint is pulled: nothing to count).
	metricCounts []*countingMetricExporter
}

func newExporterSet(cfg Config, opts Options, res *resource.Resource, closers *[]func(context.Context) error) *exporterSet {
	return &exporterSet{cfg: cfg, opts: opts, res: res, closers: closers}
}

func (s *exporterSet) consoleSink() *fileexport.Sink {
	if s.console == nil {
		w := s.opts.Stdout
		if w == nil {
			w = os.Stdout
		}
		s.console = fileexport.NewSink(w, s.res)
	}
	return s.console
}

func (s *exporterSet) fileSink() (*fileexport.Sink, error) {
	if s.file == nil {
		if s.cfg.FilePath == "" {
			return nil, fmt.Errorf("lens: the file exporter needs %s%s (the orchestrator sets it per process)", PrimaryPrefix, KeyFilePath)
		}
		f, err := fileexport.OpenFile(s.cfg.FilePath, s.res)
		if err != nil {
			return nil, fmt.Errorf("lens: file exporter: %w", err)
		}
		s.file = f
		*s.closers = append(*s.closers, func(context.Context) error { return f.Close() })
	}
	return s.file, nil
}

// protocol resolves a signal's OTLP protocol: its own setting, else the
// general one, else grpc (a Config built by hand may leave them empty).
func (s *exporterSet) protocol(signal string) string {
	for _, p := range []string{signal, s.cfg.OTLPProtocol} {
		if p != "" {
			return p
		}
	}
	return ProtocolGRPC
}

// jsonClient builds the http/json client of one signal and closes its idle
// connections at shutdown.
func (s *exporterSet) jsonClient(signal string, msgs otlpMessages) (*http.Client, error) {
	c, tr, err := newJSONHTTPClient(signal, msgs, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	*s.closers = append(*s.closers, func(context.Context) error {
		tr.CloseIdleConnections()
		return nil
	})
	return c, nil
}

// spanExporters builds the configured span exporters, each named for its
// queue's accounting. The OTLP ones send a batch in requests of at most
// MaxExportRequestBytes (see budgetExporter).
func (s *exporterSet) spanExporters(ctx context.Context) (out []namedExporter, err error) {
	if s.opts.SpanExporter != nil {
		return []namedExporter{{s.opts.SpanExporter, "custom", "custom"}}, nil
	}
	var built []namedExporter
	defer func() {
		if err != nil {
			// Stop what was started already (an OTLP client holds a
			// connection and goroutines); nothing will use it.
			for _, e := range built {
				_ = e.Shutdown(ctx)
			}
		}
	}()
	for _, name := range s.cfg.Exporters {
		switch name {
		case ExporterOTLP:
			var c otlptrace.Client
			ctype := "otlp_grpc_span_exporter"
			switch s.protocol(s.cfg.TracesProtocol) {
			case ProtocolHTTPProtobuf:
				c = otlptracehttp.NewClient(otlptracehttp.WithEncoding(otlptracehttp.EncodingProtobuf))
				ctype = "otlp_http_span_exporter"
			case ProtocolHTTPJSON:
				// The trace client writes OTLP/JSON itself.
				c = otlptracehttp.NewClient(otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON))
				ctype = "otlp_http_json_span_exporter"
			default:
				c = otlptracegrpc.NewClient()
			}
			e, err := otlptrace.New(ctx, c)
			if err != nil {
				return nil, fmt.Errorf("lens: otlp trace exporter: %w", err)
			}
			built = append(built, namedExporter{budgetExporter{e, MaxExportRequestBytes}, name, ctype})
		case ExporterConsole:
			built = append(built, namedExporter{s.consoleSink().SpanExporter(), name, "gymlens_console_span_exporter"})
		case ExporterFile:
			f, err := s.fileSink()
			if err != nil {
				return nil, err
			}
			built = append(built, namedExporter{f.SpanExporter(), name, "gymlens_file_span_exporter"})
		}
	}
	return built, nil
}

func (s *exporterSet) metricReaders(ctx context.Context) ([]sdkmetric.Reader, error) {
	if s.opts.MetricReader != nil {
		return []sdkmetric.Reader{s.opts.MetricReader}, nil
	}
	periodic := func(e sdkmetric.Exporter, name, ctype string) sdkmetric.Reader {
		opts := []sdkmetric.PeriodicReaderOption{sdkmetric.WithInterval(s.cfg.MetricExportInterval)}
		if s.producer != nil {
			opts = append(opts, sdkmetric.WithProducer(s.producer))
		}
		c := &countingMetricExporter{Exporter: e, name: name, ctype: ctype}
		s.metricCounts = append(s.metricCounts, c)
		return sdkmetric.NewPeriodicReader(c, opts...)
	}
	var out []sdkmetric.Reader
	for _, name := range s.cfg.Exporters {
		switch name {
		case ExporterOTLP:
			var e sdkmetric.Exporter
			var err error
			ctype := "otlp_grpc_metric_exporter"
			// The OTLP exporters read
			// OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION
			// themselves and apply it to every histogram they export, as
			// the Python SDK's do; histogramView applies it to the gym.*
			// histograms for the other exporters too.
			switch s.protocol(s.cfg.MetricsProtocol) {
			case ProtocolHTTPProtobuf:
				e, err = otlpmetrichttp.New(ctx)
				ctype = "otlp_http_metric_exporter"
			case ProtocolHTTPJSON:
				ctype = "otlp_http_json_metric_exporter"
				var hc *http.Client
				if hc, err = s.jsonClient("METRICS", metricsMessages); err == nil {
					e, err = otlpmetrichttp.New(ctx, otlpmetrichttp.WithHTTPClient(hc))
				}
			default:
				e, err = otlpmetricgrpc.New(ctx)
			}
			if err != nil {
				return nil, fmt.Errorf("lens: otlp metric exporter: %w", err)
			}
			out = append(out, periodic(e, name, ctype))
		case ExporterConsole:
			out = append(out, periodic(s.consoleSink().MetricExporter(), name, "gymlens_console_metric_exporter"))
		case ExporterFile:
			f, err := s.fileSink()
			if err != nil {
				return nil, err
			}
			out = append(out, periodic(f.MetricExporter(), name, "gymlens_file_metric_exporter"))
		case ExporterPrometheus:
			r, err := s.prometheus()
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// logExporters builds the configured log exporters, each named for its
// queue's accounting.
func (s *exporterSet) logExporters(ctx context.Context) ([]namedLogExporter, error) {
	if s.opts.LogExporter != nil {
		return []namedLogExporter{{s.opts.LogExporter, "custom", "custom"}}, nil
	}
	var out []namedLogExporter
	for _, name := range s.cfg.Exporters {
		switch name {
		case ExporterOTLP:
			var e sdklog.Exporter
			var err error
			ctype := "otlp_grpc_log_exporter"
			switch s.protocol(s.cfg.LogsProtocol) {
			case ProtocolHTTPProtobuf:
				e, err = otlploghttp.New(ctx)
				ctype = "otlp_http_log_exporter"
			case ProtocolHTTPJSON:
				ctype = "otlp_http_json_log_exporter"
				var hc *http.Client
				if hc, err = s.jsonClient("LOGS", logsMessages); err == nil {
					e, err = otlploghttp.New(ctx, otlploghttp.WithHTTPClient(hc))
				}
			default:
				e, err = otlploggrpc.New(ctx)
			}
			if err != nil {
				return nil, fmt.Errorf("lens: otlp log exporter: %w", err)
			}
			out = append(out, namedLogExporter{e, name, ctype})
		case ExporterConsole:
			out = append(out, namedLogExporter{s.consoleSink().LogExporter(), name, "gymlens_console_log_exporter"})
		case ExporterFile:
			f, err := s.fileSink()
			if err != nil {
				return nil, err
			}
			out = append(out, namedLogExporter{f.LogExporter(), name, "gymlens_file_log_exporter"})
		}
	}
	return out, nil
}

// prometheus starts the pull endpoint. It gets its own registry, so the
// page shows this process's OpenTelemetry metrics and nothing global.
func (s *exporterSet) prometheus() (sdkmetric.Reader, error) {
	reg := prometheus.NewRegistry()
	opts := []otelprom.Option{otelprom.WithRegisterer(reg)}
	if s.producer != nil {
		opts = append(opts, otelprom.WithProducer(s.producer))
	}
	exp, err := otelprom.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("lens: prometheus exporter: %w", err)
	}
	addr := s.cfg.PrometheusAddr
	if addr == "" {
		addr = DefaultPrometheusAddr
	}
	addr, err = contract.ListenAddr(addr) // ":9464" is loopback, not every interface
	if err != nil {
		return nil, fmt.Errorf("lens: prometheus endpoint: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("lens: prometheus endpoint %s: %w", addr, err)
	}
	s.promAddr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	*s.closers = append(*s.closers, func(ctx context.Context) error {
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = srv.Close()
			return fmt.Errorf("lens: prometheus endpoint: %w", err)
		}
		return nil
	})
	return exp, nil
}
