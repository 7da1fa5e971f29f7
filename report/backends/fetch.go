package backends

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
)

// Defaults of Options.
const (
	// DefaultLookback is how far back from Until the run is looked for.
	DefaultLookback = 24 * time.Hour
	// DefaultTraceLimit is the most traces asked of Jaeger per service.
	DefaultTraceLimit = 20000
)

// Options say where a run is and how much of it to read.
type Options struct {
	// JaegerURL is the base URL of Jaeger's query service
	// (http://host:16686); "" reads no traces.
	JaegerURL string
	// PrometheusURL is the base URL of Prometheus (http://host:9090); ""
	// reads no metrics.
	PrometheusURL string
	// RunID is the run's id, the nemo.run.id every process carries.
	// Required.
	RunID string
	// Since and Until bound the search; zero values mean
	// Until-DefaultLookback and now.
	Since, Until time.Time
	// TraceLimit is the most traces asked of Jaeger per service; 0 means
	// DefaultTraceLimit.
	TraceLimit int
	// Step is the resolution of Prometheus's samples; 0 picks one from
	// the run's length (at most 2000 samples per series, at least 1 s).
	Step time.Duration
	// RunDir, when set, is a run directory (the head host's) whose
	// rollouts, failures and config are copied beside the telemetry read
	// from the backends.
	RunDir string
	// Client is the HTTP client; nil means one with a 60 s timeout.
	Client *http.Client
}

// Stats says what Fetch read.
type Stats struct {
	// Processes, Traces and Spans are what Jaeger gave; Series the
	// Prometheus series of the run.
	Processes, Traces, Spans, Series int
	// TraceLimitHit names the services whose search returned
	// Options.TraceLimit traces: Jaeger may hold more.
	TraceLimitHit []string
	// Start and End are the extent of the run's metric samples; zero
	// without Prometheus or samples.
	Start, End time.Time
	// Copied names the files linked from Options.RunDir.
	Copied []string
}

// ErrNoData is returned when neither backend holds anything of the run.
var ErrNoData = errors.New("no span and no metric of the run in the backends")

// proc is one process as the backends know it.
type proc struct {
	attrs   map[string]any
	spans   []*telfile.Span
	metrics []*telfile.Metric
}

type fetcher struct {
	opts  Options
	stats Stats
	procs map[string]*proc
	order []*proc
}

// process returns the process the resource attributes describe, merging
// what another backend said of it: a process is its service.instance.id
// and process.pid.
func (f *fetcher) process(attrs map[string]any) *proc {
	key := fmt.Sprint(attrs[contract.AttrServiceInstanceID]) + "\x00" + fmt.Sprint(attrs[contract.AttrProcessPID])
	p := f.procs[key]
	if p == nil {
		p = &proc{attrs: map[string]any{}}
		f.procs[key] = p
		f.order = append(f.order, p)
	}
	for k, v := range attrs {
		if _, ok := p.attrs[k]; !ok {
			p.attrs[k] = v
		}
	}
	return p
}

func (f *fetcher) getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := f.opts.Client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, res.Status, strings.TrimSpace(string(body)))
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// Fetch reads run opts.RunID from the backends and writes it into dir in
// the run directory's layout (dir must not hold a telemetry directory
// already), ready for report.Load.
func Fetch(ctx context.Context, opts Options, dir string) (Stats, error) {
	if opts.RunID == "" {
		return Stats{}, errors.New("backends: a run id is required")
	}
	if opts.JaegerURL == "" && opts.PrometheusURL == "" {
		return Stats{}, errors.New("backends: neither a Jaeger nor a Prometheus URL")
	}
	opts.JaegerURL = strings.TrimRight(opts.JaegerURL, "/")
	opts.PrometheusURL = strings.TrimRight(opts.PrometheusURL, "/")
	if opts.Until.IsZero() {
		opts.Until = time.Now()
	}
	if opts.Since.IsZero() {
		opts.Since = opts.Until.Add(-DefaultLookback)
	}
	if !opts.Since.Before(opts.Until) {
		return Stats{}, fmt.Errorf("backends: since %s is not before until %s", opts.Since, opts.Until)
	}
	if opts.TraceLimit <= 0 {
		opts.TraceLimit = DefaultTraceLimit
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: time.Minute}
	}
	f := &fetcher{opts: opts, procs: map[string]*proc{}}
	if opts.JaegerURL != "" {
		traces, err := f.jaegerRun(ctx)
		if err != nil {
			return f.stats, fmt.Errorf("jaeger %s: %w", opts.JaegerURL, err)
		}
		f.addTraces(traces)
	}
	if opts.PrometheusURL != "" {
		if err := f.readMetrics(ctx); err != nil {
			return f.stats, fmt.Errorf("prometheus %s: %w", opts.PrometheusURL, err)
		}
	}
	f.stats.Processes = len(f.order)
	if f.stats.Spans == 0 && f.stats.Series == 0 {
		return f.stats, fmt.Errorf("run %q: %w", opts.RunID, ErrNoData)
	}
	if err := f.write(dir); err != nil {
		return f.stats, err
	}
	if opts.RunDir != "" {
		if err := f.copyRunFiles(opts.RunDir, dir); err != nil {
			return f.stats, err
		}
	}
	return f.stats, nil
}

// readMetrics reads every contract instrument's series of the run.
func (f *fetcher) readMetrics(ctx context.Context) error {
	start, end, ok, err := f.promExtent(ctx)
	if err != nil || !ok {
		return err
	}
	f.stats.Start, f.stats.End = start, end
	step := f.stepFor(end.Sub(start))
	for _, in := range contract.Instruments() {
		if err := f.addInstrument(ctx, in, start, end, step); err != nil {
			return err
		}
	}
	return nil
}

// fileName names a process's telemetry file: its server name (the
// service name for a process without one), as the run directory does.
func fileName(p *proc) string {
	name := fmt.Sprint(p.attrs[contract.AttrServerName])
	if p.attrs[contract.AttrServerName] == nil {
		name = fmt.Sprint(p.attrs[contract.AttrServiceName])
	}
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, name)
}

// write creates dir/telemetry/<process>.jsonl for every process.
func (f *fetcher) write(dir string) error {
	tdir := filepath.Join(dir, contract.RunTelemetryDir)
	if _, err := os.Stat(tdir); err == nil {
		return fmt.Errorf("backends: %s exists already", tdir)
	}
	if err := os.MkdirAll(tdir, contract.RunDirPerm); err != nil {
		return err
	}
	used := map[string]int{}
	for _, p := range f.order {
		if len(p.spans) == 0 && len(p.metrics) == 0 {
			continue
		}
		name := fileName(p)
		if used[name]++; used[name] > 1 {
			name += "-" + fmt.Sprint(p.attrs[contract.AttrProcessPID])
		}
		if err := p.writeFile(filepath.Join(tdir, contract.TelemetryFileName(name))); err != nil {
			return err
		}
	}
	return nil
}

func (p *proc) writeFile(path string) error {
	file, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, contract.RunFilePerm)
	if err != nil {
		return err
	}
	sort.SliceStable(p.spans, func(i, j int) bool { return p.spans[i].EndNS < p.spans[j].EndNS })
	sort.SliceStable(p.metrics, func(i, j int) bool { return p.metrics[i].TimeNS < p.metrics[j].TimeNS })
	first := int64(0)
	if len(p.spans) > 0 {
		first = p.spans[0].StartNS
	}
	if len(p.metrics) > 0 && (first == 0 || p.metrics[0].TimeNS < first) {
		first = p.metrics[0].TimeNS
	}
	enc := telfile.NewEncoder(file)
	err = enc.Encode(telfile.Resource{Format: telfile.FormatVersion, TimeNS: first, Attributes: p.attrs})
	// Spans and metrics in time order, as a process writes them.
	si, mi := 0, 0
	for err == nil && (si < len(p.spans) || mi < len(p.metrics)) {
		if mi >= len(p.metrics) || si < len(p.spans) && p.spans[si].EndNS <= p.metrics[mi].TimeNS {
			err = enc.Encode(p.spans[si])
			si++
		} else {
			err = enc.Encode(p.metrics[mi])
			mi++
		}
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyRunFiles links the rollouts, failures and config of a run directory,
// whichever exist, into to (a rollouts file may be large: it is not
// copied).
func (f *fetcher) copyRunFiles(from, to string) error {
	from, err := filepath.Abs(from)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(from); err != nil || !fi.IsDir() {
		return fmt.Errorf("backends: run directory %s: not a directory (%v)", from, err)
	}
	for _, name := range []string{contract.RunRolloutsFile, contract.RunFailuresFile, contract.RunConfigFile} {
		src := filepath.Join(from, name)
		if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.Symlink(src, filepath.Join(to, name)); err != nil {
			return err
		}
		f.stats.Copied = append(f.stats.Copied, name)
	}
	return nil
}
