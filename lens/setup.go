package lens

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	logglobal "go.opentelemetry.io/otel/log/global"
	lognoop "go.opentelemetry.io/otel/log/noop"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/internal/agg"
	"github.com/gymlens/gymlens/lens/internal/fileexport"
)

// ErrAlreadySetUp is returned by Setup when an enabled set-up already
// happened in this process (see ResetForTesting).
var ErrAlreadySetUp = errors.New("lens: telemetry already set up in this process")

// Options carry what Setup needs beyond the configuration.
type Options struct {
	// Groups resolves SPAN_GROUPS; nil means NewGroupSet().
	Groups *GroupSet
	// ServiceName overrides cfg.ServiceName as the service.name resource
	// attribute (the caller applies per-server naming).
	ServiceName string
	// Attributes are added to the resource of every signal (see
	// ResourceAttributes for what wins over what).
	Attributes []attribute.KeyValue
	// Rank, WorldSize and LocalRank feed the export strategy (see
	// Decide); Rank and WorldSize are also the dl.rank and dl.world_size
	// resource attributes. WorldSize 0 reads rank and world size from RANK
	// and WORLD_SIZE (unset: a single process); LocalRank 0 reads
	// LOCAL_RANK.
	Rank, WorldSize, LocalRank int
	// MetricReader, when set, replaces the configured metric exporters.
	// The contract's synchronous instruments are then the SDK's (lens's
	// own aggregation reaches only the readers lens builds; see
	// Instrumenter).
	MetricReader sdkmetric.Reader
	// SpanExporter, when set, replaces the configured span exporters
	// (behind the same batch span processor).
	SpanExporter sdktrace.SpanExporter
	// SpanProcessors are added to the tracer provider next to the
	// configured exporters' processors; each sees every span the sampler
	// records, starting and ending. The handle shuts them down with the
	// provider. They are used only where the process records spans (traces
	// on and at least one exporter that takes spans).
	SpanProcessors []sdktrace.SpanProcessor
	// LogExporter, when set, replaces the configured log exporters.
	LogExporter sdklog.Exporter
	// Stdout receives the console exporter's lines; nil means os.Stdout.
	Stdout io.Writer
	// Logger receives lens's own warnings; nil means slog.Default() as it
	// was before Setup.
	Logger *slog.Logger
}

// Handle is one process's telemetry. A nil *Handle is valid and behaves as a
// disabled one: no-op tracer and meter, not exporting.
type Handle struct {
	cfg       Config
	exporting bool
	groups    GroupMask
	groupSet  *GroupSet
	res       *resource.Resource

	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
	lp     *sdklog.LoggerProvider
	tracer trace.Tracer
	meter  metric.Meter
	// agg is lens's own aggregation of the contract's synchronous
	// histograms and counters, nil when the SDK aggregates them
	// (aggregate.go).
	agg *agg.Registry
	// followsParent: the sampler drops every span under a sampled-out
	// parent (see followsUnsampledParent and SampledOut).
	followsParent bool

	promAddr string
	closers  []func(context.Context) error

	queues       []*spanQueue
	logQueues    []*logQueue
	metricCounts []*countingMetricExporter
	// file is the run-directory sink when the file exporter is in use;
	// the loss accounting is written through it (see writeAccount).
	file *fileexport.Sink
	// account is the account Shutdown wrote, encoded (see Account).
	account atomic.Pointer[accountLines]
	warn    *slog.Logger
	start   time.Time

	prevSlog     *slog.Logger
	prevLogOut   io.Writer
	prevLogFlags int

	shutdownOnce sync.Once
	shutdownErr  error
}

var (
	noopTracer = tracenoop.NewTracerProvider().Tracer(contract.TracerScope)
	noopMeter  = metricnoop.NewMeterProvider().Meter(contract.MeterScope)
)

// Tracer returns the process tracer (a no-op one when not exporting traces).
// Its instrumentation scope is contract.TracerScope, the one NeMo Gym starts
// its spans from.
func (h *Handle) Tracer() trace.Tracer {
	if h == nil || h.tracer == nil {
		return noopTracer
	}
	return h.tracer
}

// Meter returns the process meter (a no-op one when not exporting metrics).
// Its instrumentation scope is contract.MeterScope, nemo-lens's meter.
func (h *Handle) Meter() metric.Meter {
	if h == nil || h.meter == nil {
		return noopMeter
	}
	return h.meter
}

// IsExporting reports whether this process exports telemetry at all.
func (h *Handle) IsExporting() bool { return h != nil && h.exporting }

// MetricsExporting reports whether this process exports metrics.
func (h *Handle) MetricsExporting() bool { return h != nil && h.exporting && h.mp != nil }

// TracesExporting reports whether this process exports traces.
func (h *Handle) TracesExporting() bool { return h != nil && h.exporting && h.tp != nil }

// Config returns the configuration the handle was built from.
func (h *Handle) Config() Config {
	if h == nil {
		return Config{}
	}
	return h.cfg
}

// SpanGroups returns the sorted names of the groups this handle enabled.
func (h *Handle) SpanGroups() []string {
	if h == nil || h.groupSet == nil {
		return nil
	}
	return h.groupSet.Names(h.groups)
}

// Resource returns the resource shared by every signal, or nil.
func (h *Handle) Resource() *resource.Resource {
	if h == nil {
		return nil
	}
	return h.res
}

// PrometheusAddr returns the address the prometheus endpoint listens on, or
// "" when that exporter is not in use.
func (h *Handle) PrometheusAddr() string {
	if h == nil {
		return ""
	}
	return h.promAddr
}

// DroppedSpans returns how many finished spans were dropped because an
// export queue was full (the exporter could not keep up).
func (h *Handle) DroppedSpans() uint64 {
	if h == nil {
		return 0
	}
	var n uint64
	for _, q := range h.queues {
		n += q.Dropped()
	}
	return n
}

// SpanStats returns the account of every span exporter's queue (see
// SpanStats), in configuration order; nil when no spans are recorded.
// After Shutdown it is final.
func (h *Handle) SpanStats() []SpanStats {
	if h == nil {
		return nil
	}
	var out []SpanStats
	for _, q := range h.queues {
		out = append(out, q.Stats())
	}
	return out
}

// MetricStats returns the account of every push metric exporter (see
// MetricStats), in configuration order; nil when metrics are off or only
// pulled. After Shutdown it is final.
func (h *Handle) MetricStats() []MetricStats {
	if h == nil {
		return nil
	}
	var out []MetricStats
	for _, c := range h.metricCounts {
		out = append(out, c.Stats())
	}
	return out
}

// LogStats returns the account of every log exporter's queue (see
// LogStats), in configuration order; nil when logs are off. After
// Shutdown it is final.
func (h *Handle) LogStats() []LogStats {
	if h == nil {
		return nil
	}
	var out []LogStats
	for _, q := range h.logQueues {
		out = append(out, q.Stats())
	}
	return out
}

// flushBudget is the bound on one flush or shutdown of every signal
// together: ctx, cut to the OTLP export timeout (KeyOTLPTimeout).
func (h *Handle) flushBudget(ctx context.Context) (context.Context, context.CancelFunc) {
	budget := h.cfg.OTLPTimeout
	if budget <= 0 {
		budget = DefaultOTLPTimeout
	}
	return context.WithTimeout(ctx, budget)
}

// eachSignal runs the given flushes or shutdowns of the three signals
// (nil for a signal that is off) at once, each under ctx, and joins their
// errors.
func eachSignal(ctx context.Context, trace, metric, logs func(context.Context) error) error {
	var (
		wg   sync.WaitGroup
		errs [3]error
	)
	for i, fn := range []func(context.Context) error{trace, metric, logs} {
		if fn == nil {
			continue
		}
		wg.Go(func() { errs[i] = fn(ctx) })
	}
	wg.Wait()
	return errors.Join(errs[:]...)
}

// ForceFlush exports everything buffered so far: traces, metrics and logs
// at once, sharing one deadline, ctx's or the OTLP export timeout
// (KeyOTLPTimeout) from now, whichever comes first. What a failed export
// lost is counted (see SpanStats, MetricStats, LogStats).
func (h *Handle) ForceFlush(ctx context.Context) error {
	if h == nil || !h.exporting {
		return nil
	}
	ctx, cancel := h.flushBudget(ctx)
	defer cancel()
	var tf, mf, lf func(context.Context) error
	if h.tp != nil {
		tf = h.tp.ForceFlush
	}
	if h.mp != nil {
		mf = h.mp.ForceFlush
	}
	if h.lp != nil {
		lf = h.lp.ForceFlush
	}
	return eachSignal(ctx, tf, mf, lf)
}

// Shutdown closes the gate, flushes and stops every provider and exporter,
// and restores the global providers. Traces, metrics and logs flush at
// once under one deadline, ctx's or the OTLP export timeout
// (KeyOTLPTimeout) from now, whichever comes first; what did not make it
// by then is counted, and the account written to the process's telemetry
// file (see writeAccount, bounded by a second of its own). It is
// idempotent (later calls return the first result).
func (h *Handle) Shutdown(ctx context.Context) error {
	if h == nil {
		return nil
	}
	h.shutdownOnce.Do(func() {
		h.shutdownErr = h.shutdown(ctx)
	})
	return h.shutdownErr
}

func (h *Handle) shutdown(ctx context.Context) error {
	proc.Lock()
	if live.Load() == h {
		gate.Store(0)
		live.Store(nil)
	}
	proc.Unlock()
	if !h.exporting {
		return nil
	}
	return h.release(ctx)
}

// release undoes build: it restores the log and slog defaults, puts no-op
// providers in the globals, then shuts down the providers (flushing them)
// and finally the sinks they flushed into.
func (h *Handle) release(ctx context.Context) error {
	if h.prevSlog != nil {
		slog.SetDefault(h.prevSlog)
		log.SetOutput(h.prevLogOut)
		log.SetFlags(h.prevLogFlags)
	}
	otel.SetTracerProvider(tracenoop.NewTracerProvider())
	otel.SetMeterProvider(metricnoop.NewMeterProvider())
	logglobal.SetLoggerProvider(lognoop.NewLoggerProvider())
	ctx, cancel := h.flushBudget(ctx)
	defer cancel()
	var ts, ms, ls func(context.Context) error
	if h.tp != nil {
		ts = func(ctx context.Context) error { return wrap("traces", h.tp.Shutdown(ctx)) }
	}
	if h.mp != nil {
		ms = func(ctx context.Context) error { return wrap("metrics", h.mp.Shutdown(ctx)) }
	}
	if h.lp != nil {
		ls = func(ctx context.Context) error { return wrap("logs", h.lp.Shutdown(ctx)) }
	}
	errs := []error{eachSignal(ctx, ts, ms, ls)}
	// After the providers: their shutdown settles every account.
	errs = append(errs, h.writeAccount(ctx))
	// Closers run in reverse order of creation: the prometheus server and
	// file sinks go last, after the providers have flushed into them.
	for i := len(h.closers) - 1; i >= 0; i-- {
		errs = append(errs, h.closers[i](ctx))
	}
	return errors.Join(errs...)
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("lens: shut down %s: %w", what, err)
}

// proc serialises set-up and shutdown and remembers whether an enabled
// set-up has happened; live is the handle in use, read lock-free by the span
// helpers. Together with the gate they are the per-process telemetry state.
var (
	proc struct {
		sync.Mutex
		setUp bool
	}
	live atomic.Pointer[Handle]
)

// Current returns the handle of the live set-up, or nil.
func Current() *Handle { return live.Load() }

// ResetForTesting shuts down the live handle, if any, closes the gate and
// lets Setup run again. Tests only.
func ResetForTesting() {
	if h := live.Load(); h != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = h.Shutdown(ctx)
		cancel()
	}
	proc.Lock()
	live.Store(nil)
	proc.setUp = false
	gate.Store(0)
	proc.Unlock()
}

// Setup builds the process telemetry from cfg. A disabled configuration, or
// an export strategy that rules this process out, yields a non-exporting
// handle with no-op providers and every span group off. Only one enabled
// Setup may run per process; a second one fails with ErrAlreadySetUp.
func Setup(ctx context.Context, cfg Config, opts Options) (*Handle, error) {
	groups := opts.Groups
	if groups == nil {
		groups = NewGroupSet()
	}
	h := &Handle{cfg: cfg, groupSet: groups}
	if !cfg.Enabled {
		return h, nil
	}
	mask, err := groups.Resolve(cfg.SpanGroups)
	if err != nil {
		return nil, fmt.Errorf("lens: %s: %w", KeySpanGroups, err)
	}
	d, err := Decide(cfg, opts.decideOptions())
	if err != nil {
		return nil, err
	}
	if d.SetupErr != nil {
		return nil, d.SetupErr
	}
	exporting := d.Export
	opts.Rank, opts.WorldSize, opts.LocalRank = d.Rank, d.WorldSize, d.LocalRank

	proc.Lock()
	defer proc.Unlock()
	if proc.setUp {
		return nil, ErrAlreadySetUp
	}
	// Propagation must work even in a process that does not export, so a
	// trace passing through it stays one trace.
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
		traceContext{}, requestBaggage{}))
	proc.setUp = true
	if !exporting {
		live.Store(h)
		return h, nil
	}
	if err := h.build(ctx, opts); err != nil {
		proc.setUp = false
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = h.release(cctx)
		return nil, err
	}
	h.exporting = true
	live.Store(h)
	// Span groups only matter where spans are recorded: with traces off (or
	// no exporter that takes spans) every site stays a bare gate check.
	if h.tp != nil {
		h.groups = mask
		gate.Store(uint64(mask))
	}
	return h, nil
}

// decideOptions is the placement and the caller's own exporters as Decide
// takes them: a WorldSize of 0 leaves rank and world size to RANK and
// WORLD_SIZE, a LocalRank of 0 leaves the local rank to LOCAL_RANK.
func (o Options) decideOptions() DecideOptions {
	d := DecideOptions{
		OwnSpanExporter: o.SpanExporter != nil,
		OwnMetricReader: o.MetricReader != nil,
		OwnLogExporter:  o.LogExporter != nil,
	}
	if o.WorldSize != 0 {
		d.Rank, d.WorldSize = &o.Rank, &o.WorldSize
	}
	if o.LocalRank != 0 {
		d.LocalRank = &o.LocalRank
	}
	return d
}

func (h *Handle) build(ctx context.Context, opts Options) error {
	cfg := h.cfg
	warn := opts.Logger
	if warn == nil {
		warn = slog.Default()
	}
	h.warn, h.start = warn, time.Now()
	otel.SetErrorHandler(newRateLimitedErrorHandler(warn, 30*time.Second))

	attrs := resourceAttributes(cfg, opts, processDetectEnv())
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		// A schema URL clash still yields a usable merged resource.
		if res == nil {
			res = resource.NewSchemaless(attrs...)
		}
	}
	h.res = res

	sinks := newExporterSet(cfg, opts, res, &h.closers)
	if cfg.TracesEnabled {
		if err := h.buildTraces(ctx, sinks, opts, warn); err != nil {
			return err
		}
	}
	if cfg.MetricsEnabled {
		if err := h.buildMetrics(ctx, sinks); err != nil {
			return err
		}
	}
	if cfg.LogsEnabled {
		if err := h.buildLogs(ctx, sinks); err != nil {
			return err
		}
	}
	h.file = sinks.file
	return nil
}

// buildTraces installs the SDK's tracer provider, unless no configured
// exporter takes spans (prometheus alone): then spans are not recorded at
// all. Each exporter gets a batch span processor (see spanQueue); the
// caller's processors come after them. The sampler is the one the SDK
// would read from OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
// (parentbased_always_on when unset), built by lens so that it knows
// whether spans under a sampled-out parent can be skipped; the SDK reads
// the OTEL_SPAN_*, OTEL_EVENT_* and OTEL_LINK_* count limits itself; the attribute value length limit is lens's (see spanLimits).
func (h *Handle) buildTraces(ctx context.Context, sinks *exporterSet, opts Options, warn *slog.Logger) error {
	exps, err := sinks.spanExporters(ctx)
	if err != nil || len(exps) == 0 {
		return err
	}
	sampler, info := samplerFromEnv(os.Getenv)
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(h.res),
		sdktrace.WithRawSpanLimits(spanLimits(h.cfg)), sdktrace.WithSampler(sampler)}
	for _, e := range exps {
		q := newSpanQueue(e.SpanExporter, e.name, e.ctype, warn, batchSettingsFrom(h.cfg))
		h.queues = append(h.queues, q)
		tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(q))
	}
	for _, p := range opts.SpanProcessors {
		if p != nil {
			tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(p))
		}
	}
	h.tp = sdktrace.NewTracerProvider(tpOpts...)
	h.tracer = h.tp.Tracer(contract.TracerScope)
	if h.followsParent = followsUnsampledParent(info.Name); h.followsParent {
		h.tracer = followingTracer{h.tracer}
	}
	otel.SetTracerProvider(h.tp)
	return nil
}

func (h *Handle) buildMetrics(ctx context.Context, sinks *exporterSet) error {
	own := newAggregation(h.cfg, sinks.opts)
	if own != nil {
		sinks.producer = own
	}
	readers, err := sinks.metricReaders(ctx)
	if err != nil || len(readers) == 0 {
		return err
	}
	h.agg = own
	h.metricCounts = sinks.metricCounts
	mpOpts := []sdkmetric.Option{sdkmetric.WithResource(h.res)}
	if v, ok := histogramView(h.cfg); ok {
		mpOpts = append(mpOpts, sdkmetric.WithView(v))
	}
	for _, r := range readers {
		mpOpts = append(mpOpts, sdkmetric.WithReader(r))
	}
	h.mp = sdkmetric.NewMeterProvider(mpOpts...)
	h.meter = h.mp.Meter(contract.MeterScope)
	otel.SetMeterProvider(h.mp)
	h.promAddr = sinks.promAddr
	return nil
}

// buildLogs bridges log/slog into OpenTelemetry logs: the default logger
// becomes a fan-out to the handler it had before and to the bridge.
func (h *Handle) buildLogs(ctx context.Context, sinks *exporterSet) error {
	exps, err := sinks.logExporters(ctx)
	if err != nil || len(exps) == 0 {
		return err
	}
	lpOpts := []sdklog.LoggerProviderOption{sdklog.WithResource(h.res)}
	for _, e := range exps {
		q := newLogQueue(e.Exporter, e.name, e.ctype)
		h.logQueues = append(h.logQueues, q)
		lpOpts = append(lpOpts, sdklog.WithProcessor(q))
	}
	h.lp = sdklog.NewLoggerProvider(lpOpts...)
	logglobal.SetLoggerProvider(h.lp)
	h.prevSlog = slog.Default()
	h.prevLogOut, h.prevLogFlags = log.Writer(), log.Flags()
	prev := h.prevSlog.Handler()
	if isStdlibDefault(prev) {
		// The standard default handler writes through package log, which
		// SetDefault points back at slog: keeping it would recurse. Write
		// to where package log wrote instead.
		prev = slog.NewTextHandler(h.prevLogOut, nil)
	}
	// Log records carry the tracer's scope: they come from the same Gym
	// code as its spans.
	bridge := otelslog.NewHandler(contract.TracerScope, otelslog.WithLoggerProvider(h.lp))
	slog.SetDefault(slog.New(slog.NewMultiHandler(prev, bridge)))
	return nil
}

// isStdlibDefault reports whether h is log/slog's built-in default handler.
func isStdlibDefault(h slog.Handler) bool {
	return fmt.Sprintf("%T", h) == "*slog.defaultHandler"
}

// LoggerProvider returns the OTel logger provider, or a no-op one when logs
// are off.
func (h *Handle) LoggerProvider() otellog.LoggerProvider {
	if h == nil || h.lp == nil {
		return lognoop.NewLoggerProvider()
	}
	return h.lp
}

// rateLimitedErrorHandler turns the SDK's export errors into at most one
// warning per interval, with a count of the ones it held back.
type rateLimitedErrorHandler struct {
	log        *slog.Logger
	every      time.Duration
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func newRateLimitedErrorHandler(log *slog.Logger, every time.Duration) *rateLimitedErrorHandler {
	return &rateLimitedErrorHandler{log: log, every: every}
}

func (r *rateLimitedErrorHandler) Handle(err error) {
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.every {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.suppressed = 0
	r.last = now
	r.mu.Unlock()
	r.log.Warn("telemetry export error", "err", err, "suppressed_since_last", n)
}

// histogramView is the view the histogram settings ask for on the gym.*
// histograms: base2 exponential on all of them, or explicit boundaries on
// the millisecond ones (gym.agent.turn_count counts turns, not time). None
// when neither is set: the SDK's default buckets, as NeMo Gym.
//
// A view rather than a reader's aggregation selector, so every reader
// (OTLP, Prometheus, console, file, a caller's) agrees; the OTLP exporters
// also read the aggregation variable themselves and apply it to every
// histogram they export, as the Python SDK's do. The exponential
// histogram is theirs for that variable: at most 160 buckets, scale 20.
func histogramView(cfg Config) (sdkmetric.View, bool) {
	switch {
	case cfg.HistogramAggregation == HistogramBase2Exponential:
		return sdkmetric.NewView(
			sdkmetric.Instrument{Name: contract.GymPattern, Kind: sdkmetric.InstrumentKindHistogram},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}},
		), true
	case cfg.HistogramBoundariesMS != nil:
		return sdkmetric.NewView(
			sdkmetric.Instrument{Name: contract.GymPattern, Kind: sdkmetric.InstrumentKindHistogram, Unit: "ms"},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: slices.Clone(cfg.HistogramBoundariesMS)}},
		), true
	}
	return nil, false
}
