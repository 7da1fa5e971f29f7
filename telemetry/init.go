package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/contrib/instrumentation/runtime"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/lens/instruments/gym"
)

// InitOptions describe the calling process.
type InitOptions struct {
	// ServerName is this server's name in the fleet config (for example
	// "arithmetic").
	ServerName string
	// ServerType is one of the contract.ServerType constants, or "" for a process
	// outside the fleet.
	ServerType string
	// ResourceAttributes are added to every signal's resource.
	ResourceAttributes map[string]string
	// Rank and WorldSize feed the export strategy; WorldSize 0 leaves them
	// to RANK and WORLD_SIZE, read by lens.Decide (unset: a single
	// process). LOCAL_RANK is always read there.
	Rank, WorldSize int
	// MetricReader, when set, replaces the configured metric exporters.
	MetricReader sdkmetric.Reader
	// SpanExporter, when set, replaces the configured span exporters.
	SpanExporter sdktrace.SpanExporter
	// SpanProcessors are added next to the configured exporters' (see
	// lens.Options.SpanProcessors).
	SpanProcessors []sdktrace.SpanProcessor
}

// state is the per-process telemetry: the handle, the gym instruments (nil
// unless metrics are exported) and the role. It is replaced as a whole.
type state struct {
	handle       *lens.Handle
	instruments  *gym.Instruments
	role         string
	orchestrator bool
	err          error
}

var (
	current atomic.Pointer[state]
	// instruments mirrors current's instruments: the recorders' gate is
	// this one load, small enough for them to be inlined at call sites.
	instruments atomic.Pointer[gym.Instruments]
	initMu      sync.Mutex
)

// publish makes s the process's telemetry state.
func publish(s *state) {
	current.Store(s)
	if s == nil {
		instruments.Store(nil)
		return
	}
	instruments.Store(s.instruments)
}

// Init sets up this process's telemetry from the environment. It runs once:
// later calls return the first result. It returns (nil, nil) when telemetry
// is disabled, and (nil, err) for a bad configuration, after one warning;
// telemetry is then off and the process carries on. It never panics.
func Init(opts InitOptions) (h *lens.Handle, err error) {
	initMu.Lock()
	defer initMu.Unlock()
	if s := current.Load(); s != nil {
		return s.handle, s.err
	}
	defer func() {
		if r := recover(); r != nil {
			h, err = nil, fmt.Errorf("telemetry: init panicked: %v", r)
			publish(&state{role: opts.ServerType, orchestrator: opts.ServerType == contract.ServerTypeOrchestrator, err: err})
		}
	}()
	s := &state{role: opts.ServerType, orchestrator: opts.ServerType == contract.ServerTypeOrchestrator}
	s.handle, s.instruments, s.err = setup(opts)
	if s.err != nil {
		slog.Warn("telemetry disabled: bad configuration", "err", s.err)
	}
	publish(s)
	return s.handle, s.err
}

func setup(opts InitOptions) (*lens.Handle, *gym.Instruments, error) {
	if !contract.IsRole(opts.ServerType) {
		return nil, nil, fmt.Errorf("telemetry: unknown server type %q", opts.ServerType)
	}
	cfg, err := lens.LoadConfig(lens.LoadOptions{Groups: GroupSet()})
	if _, enErr := lens.ParseBool(sourceValue(cfg, lens.KeyEnabled)); enErr == nil && !cfg.Enabled {
		return nil, nil, nil // disabled: the other settings do not matter
	}
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: %w", err)
	}

	// nemo.run.id and service.instance.id come from lens's resource, with
	// the rest of what every process of the run shares.
	attrs := GymAttributes(cfg, opts.ServerName, opts.ServerType)
	for k, v := range opts.ResourceAttributes {
		attrs = append(attrs, attribute.String(k, v))
	}
	h, err := lens.Setup(context.Background(), cfg, lens.Options{
		Groups:         GroupSet(),
		ServiceName:    ServiceName(cfg, opts.ServerName),
		Attributes:     attrs,
		Rank:           opts.Rank,
		WorldSize:      opts.WorldSize,
		MetricReader:   opts.MetricReader,
		SpanExporter:   opts.SpanExporter,
		SpanProcessors: opts.SpanProcessors,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: %w", err)
	}
	var ins *gym.Instruments
	if h.MetricsExporting() {
		if ins, err = gym.New(h.Instrumenter()); err != nil {
			_ = h.Shutdown(context.Background())
			return nil, nil, fmt.Errorf("telemetry: %w", err)
		}
		startRuntimeMetrics()
	}
	return h, ins, nil
}

// ServiceName is the service.name a process called serverName reports
// under cfg: the fleet's service name, with "/<server name>" appended when
// cfg asks for a name per server.
func ServiceName(cfg lens.Config, serverName string) string {
	if cfg.ServiceNamePerServer && serverName != "" {
		return cfg.ServiceName + "/" + serverName
	}
	return cfg.ServiceName
}

// GymAttributes are the NeMo Gym resource attributes Init gives the
// process serverName of type serverType under cfg (the service group, the
// gymlens version, the server's name and type when known). lens adds the
// attributes every process of a run shares; `gymlens telemetry check` shows
// the same list.
func GymAttributes(cfg lens.Config, serverName, serverType string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String(contract.AttrServiceGroup, cfg.ServiceName),
		attribute.String(contract.AttrVersion, contract.Version),
	}
	if serverName != "" {
		attrs = append(attrs, attribute.String(contract.AttrServerName, serverName))
	}
	if serverType != "" {
		attrs = append(attrs, attribute.String(contract.AttrServerType, serverType))
	}
	return attrs
}

// startRuntimeMetrics exports the Go runtime's metrics (go.memory.used,
// go.goroutine.count, ...; scope go.opentelemetry.io/contrib/
// instrumentation/runtime) on the meter provider lens.Setup just made the
// process's. Their callback ends with that provider; a failure is logged
// and costs only those metrics.
func startRuntimeMetrics() {
	if err := runtime.Start(runtime.WithMeterProvider(otel.GetMeterProvider())); err != nil {
		slog.Warn("telemetry: Go runtime metrics not exported", "err", err)
	}
}

func sourceValue(cfg lens.Config, key string) string {
	s, _ := cfg.Source(key)
	return s.Value
}

// Get returns the handle Init built, or nil when telemetry is off or Init
// has not run. A nil handle is safe to use.
func Get() *lens.Handle {
	if s := current.Load(); s != nil {
		return s.handle
	}
	return nil
}

// Instruments returns the gym instruments, or nil unless this process was
// initialised and exports metrics. Recorders check it and nothing else.
func Instruments() *gym.Instruments { return instruments.Load() }

// Recording reports whether this process records metrics: Init ran and it
// exports them. It is the recorders' gate, one atomic load.
func Recording() bool { return instruments.Load() != nil }

// Role returns the server type Init was given, or "" before Init.
func Role() string {
	if s := current.Load(); s != nil {
		return s.role
	}
	return ""
}

// IsOrchestrator reports whether Init ran with contract.ServerTypeOrchestrator.
func IsOrchestrator() bool {
	s := current.Load()
	return s != nil && s.orchestrator
}

// Shutdown flushes and stops this process's telemetry: traces, metrics
// and logs at once, bounded by ctx and by one OTLP export timeout in all
// (see lens.Handle.Shutdown), with what did not make it counted in the
// process's account. It is idempotent and fine to call without Init. The
// role stays known, so the orchestrator can still be told apart after
// shutdown.
func Shutdown(ctx context.Context) error {
	initMu.Lock()
	defer initMu.Unlock()
	s := current.Load()
	if s == nil || s.handle == nil {
		return nil
	}
	// Record nothing more; keep the role.
	publish(&state{role: s.role, orchestrator: s.orchestrator})
	// The handle first: its final collection still reads the tallies.
	err := s.handle.Shutdown(ctx)
	return errors.Join(err, s.instruments.Close())
}

// ResetForTesting shuts telemetry down and forgets Init, so a test can
// initialise again with another configuration.
func ResetForTesting() {
	initMu.Lock()
	s := current.Load()
	publish(nil)
	initMu.Unlock()
	if s != nil {
		_ = s.instruments.Close()
	}
	lens.ResetForTesting()
}
