package report

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/runconfig"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/lens/telfile"
)

// KeyBookkeeping is the member of a rollout line holding the collector's
// record of the rollout (rollout.KeyBookkeeping). The run directory's
// file names are contract.Run*.
const KeyBookkeeping = "_gymlens"

// FileError reports a file of the run directory that cannot be read. Load
// returns it for damage it cannot step over (a header from another format
// version, a file it cannot open); it names the file and, when known, the
// line.
type FileError struct {
	// Path is the file's path: the run directory as given to Load joined
	// with the file's place inside it.
	Path string
	// Line is the 1-based line number, 0 when not tied to a line.
	Line int
	// Err is the underlying problem.
	Err error
}

func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

// Unwrap returns the underlying error.
func (e *FileError) Unwrap() error { return e.Err }

// ErrNotRunDir is wrapped by Load's error for a directory that holds none
// of config.yaml, rollouts.jsonl and telemetry/.
var ErrNotRunDir = errors.New("not a run directory (no " + contract.RunConfigFile + ", " +
	contract.RunRolloutsFile + " or " + contract.RunTelemetryDir + "/)")

// DefaultKeepSlowest is the number of slowest rollouts whose traces Load
// keeps in full.
const DefaultKeepSlowest = 100

// LoadOptions tunes LoadWith: which spans the Run holds in full. Whatever
// they say, every span is read and counted, and its duration goes into
// SpanDurations; they decide which traces Run.Traces holds with every span
// and attribute, and so how much memory the Run takes.
type LoadOptions struct {
	// KeepSlowest is the number of slowest rollouts (gym.rollout spans,
	// as SlowestRollouts ranks them) whose traces are kept in full; it is
	// the most waterfalls a report of the Run can draw. Also kept are the
	// traces that the kept spans link to. 0 keeps no trace.
	KeepSlowest int
}

// Load reads the run directory dir with LoadWith, keeping the traces of
// the DefaultKeepSlowest slowest rollouts in full.
//
// The Run's aggregates (counts, durations, tallies, problems) cover every
// span, but Run.Traces holds only the traces a report draws, never every
// trace of a large run.
func Load(dir string) (Run, error) {
	return LoadWith(dir, LoadOptions{KeepSlowest: DefaultKeepSlowest})
}

// LoadWith reads the run directory dir: every telemetry/*.jsonl file,
// rollouts.jsonl, rollouts_failures.jsonl and config.yaml. The spans are read in two passes: the
// first decodes every line and keeps a few numbers per span, the second
// decodes again only the spans of the traces opts asks to keep in full
// (see LoadOptions).
//
// Damage that leaves the rest of the data trustworthy becomes a Note and
// reading goes on: a telemetry file whose last line was cut short, an
// unreadable line of rollouts.jsonl or of its failures file, a missing
// rollouts.jsonl or an unreadable config.yaml.
//
// A failure line stands for its rollout (task index, rollout index) until
// something newer does: a line of rollouts.jsonl (a resumed run completed
// the rollout) or a later failure line (a resumed run failed it again)
// supersedes it, so each rollout is counted once. Anything else (a missing directory, a corrupt
// line inside a telemetry file, a header announcing another format
// version) is an error naming the file and line; the error is a
// *FileError whenever a file is to blame.
func LoadWith(dir string, opts LoadOptions) (Run, error) {
	run := Run{Dir: dir, traceByID: map[string]*Trace{}}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return run, fmt.Errorf("run directory %s does not exist: %w", dir, fs.ErrNotExist)
	case err != nil:
		return run, fmt.Errorf("run directory: %w", err)
	case !fi.IsDir():
		return run, fmt.Errorf("run directory %s is not a directory", dir)
	}
	found := 0
	for _, name := range []string{contract.RunConfigFile, contract.RunRolloutsFile, contract.RunFailuresFile, contract.RunTelemetryDir} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			found++
		}
	}
	if found == 0 {
		return run, fmt.Errorf("%s: %w", dir, ErrNotRunDir)
	}

	l := loader{run: &run, series: map[string]*Series{}, spans: newCollector(&run, opts.KeepSlowest)}
	if err := l.readConfig(); err != nil {
		return run, err
	}
	if err := l.readTelemetry(); err != nil {
		return run, err
	}
	idx, err := l.spans.buildIndex(&l)
	if err != nil {
		return run, err
	}
	run.index = *idx
	for _, t := range l.spans.traces {
		l.widen(t.start)
		l.widen(t.end)
	}
	l.spans = nil // the first pass's numbers are no longer needed
	if err := l.readRollouts(); err != nil {
		return run, err
	}
	l.finish()
	return run, nil
}

type loader struct {
	run    *Run
	series map[string]*Series
	// spans gathers the first pass; nil once the Run is built.
	spans *collector
	// start and end bound the timestamps seen, in Unix nanoseconds; 0
	// when none was.
	start, end int64
}

// widen stretches the run's extent to take in ns.
func (l *loader) widen(ns int64) {
	if l.start == 0 || ns < l.start {
		l.start = ns
	}
	if ns > l.end {
		l.end = ns
	}
}

func (l *loader) note(file string, line int, format string, args ...any) {
	l.run.Notes = append(l.run.Notes, Note{File: file, Line: line, Message: fmt.Sprintf(format, args...)})
}

func (l *loader) readConfig() error {
	path := filepath.Join(l.run.Dir, contract.RunConfigFile)
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return &FileError{Path: path, Err: pathless(err)}
	}
	c, err := runconfig.Parse(raw)
	if err != nil {
		l.note(contract.RunConfigFile, 0, "unreadable, ignored: %v", err)
		return nil
	}
	cfg := &Config{RunID: c.RunID, TelemetryEnabled: true}
	for _, s := range c.Servers {
		cfg.Servers = append(cfg.Servers, ConfigServer{Name: s.Name, Type: s.Type})
	}
	if v, ok := c.TelemetryValue(lens.KeyEnabled); ok {
		cfg.TelemetryEnabled, _ = contract.BoolWord(v)
	}
	if v, ok := c.TelemetryValue(lens.KeyExporter); ok {
		for _, e := range strings.Split(v, ",") {
			if e = strings.ToLower(strings.TrimSpace(e)); e != "" {
				cfg.Exporters = append(cfg.Exporters, e)
			}
		}
	}
	if v, ok := c.TelemetryValue(lens.KeyExportStrategy); ok {
		cfg.ExportStrategy = strings.TrimSpace(v)
	}
	if v, ok := c.TelemetryValue(lens.KeyMetricExportInterval); ok {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
			cfg.MetricExportInterval = time.Duration(ms * float64(time.Millisecond))
		}
	}
	l.run.Config = cfg
	return nil
}

func (l *loader) readTelemetry() error {
	tdir := filepath.Join(l.run.Dir, contract.RunTelemetryDir)
	entries, err := os.ReadDir(tdir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		l.note(contract.RunTelemetryDir, 0, "no telemetry directory; the run exported no telemetry here")
		return nil
	case err != nil:
		return &FileError{Path: tdir, Err: pathless(err)}
	}
	for _, e := range entries { // ReadDir sorts by name
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		if err := l.readTelemetryFile(e.Name()); err != nil {
			return err
		}
	}
	return nil
}

func (l *loader) readTelemetryFile(name string) error {
	rel := filepath.ToSlash(filepath.Join(contract.RunTelemetryDir, name))
	path := filepath.Join(l.run.Dir, contract.RunTelemetryDir, name)
	f, err := os.Open(path)
	if err != nil {
		return &FileError{Path: path, Err: pathless(err)}
	}
	defer f.Close()
	if err := checkHeader(f); err != nil {
		return &FileError{Path: path, Line: 1, Err: err}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return &FileError{Path: path, Err: err}
	}

	p := &Process{File: name}
	l.run.Processes = append(l.run.Processes, p)
	l.spans.startFile()
	// writer tells apart the processes that appended to one file: the
	// instance id alone does not (under a run id every rank-0 server's is
	// <run>-rank0, as nemo-lens names it), the process id with it does.
	instance, writer := "", ""
	headerless := 0
	skipped := func(line int, err error) {
		l.note(rel, line, "corrupt line (%v); skipped", err)
	}
	err = telfile.ReadSkipping(f, func(rec telfile.Record) error {
		switch {
		case rec.Resource != nil:
			p.Headers++
			a := rec.Resource.Attributes
			instance = attrText(a[contract.AttrServiceInstanceID])
			writer = instance + "\x00" + attrText(a[contract.AttrProcessPID])
			if p.Headers == 1 {
				p.Resource = a
				p.ServiceName = attrText(a[contract.AttrServiceName])
				p.ServerName = attrText(a[contract.AttrServerName])
				p.ServerType = attrText(a[contract.AttrServerType])
				p.InstanceID = instance
				p.RunID = attrText(a[contract.AttrRunID])
			}
			return nil
		case p.Headers == 0 && headerless == 0:
			headerless = rec.Line
		}
		switch {
		case rec.Span != nil:
			p.Spans++
			l.spans.add(p, rec.Line, rec.Span)
		case rec.Metric != nil:
			p.Metrics++
			l.addMetric(p, instance, writer, rec.Metric)
		case rec.Log != nil:
			p.Logs++
		}
		return nil
	}, skipped)
	if headerless > 0 {
		l.note(rel, headerless, "records before any resource header; the process that wrote them is unknown")
	}
	if err == nil {
		return nil
	}
	line, detail := splitLine(err)
	if errors.Is(err, telfile.ErrTruncated) {
		l.note(rel, line, "last line is cut short (a partially written record); skipped")
		return nil
	}
	return &FileError{Path: path, Line: line, Err: detail}
}

// checkHeader looks at the first line on its own so that a file written
// in another format version gets a message saying so, rather than a
// complaint about whatever field changed.
func checkHeader(r io.Reader) error {
	sc := telfile.NewScanner(r)
	if !sc.Scan() {
		// An empty file is fine, and telfile.Read reports a first line
		// that is too long with its number.
		if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
			return err
		}
		return nil
	}
	first := bytes.TrimSpace(sc.Bytes())
	if len(first) == 0 {
		return nil
	}
	var head struct {
		Type   string          `json:"type"`
		Format json.RawMessage `json:"format"`
	}
	if json.Unmarshal(first, &head) != nil || head.Type != telfile.TypeResource {
		return nil // telfile.Read reports it with the line number
	}
	if head.Format == nil {
		return fmt.Errorf("resource header has no format version: the file was written by an older, unsupported gymlens (this report reads format %d)", telfile.FormatVersion)
	}
	var v int
	if err := json.Unmarshal(head.Format, &v); err != nil {
		return fmt.Errorf("resource header has an unreadable format version %s", head.Format)
	}
	switch {
	case v > telfile.FormatVersion:
		return fmt.Errorf("telemetry format %d is newer than this report understands (format %d); use a newer gym to read it", v, telfile.FormatVersion)
	case v < telfile.FormatVersion:
		return fmt.Errorf("telemetry format %d is older than this report understands (format %d); use the gym release that wrote it", v, telfile.FormatVersion)
	}
	return nil
}

// splitLine takes the "line N: " prefix off an error from telfile.Read.
func splitLine(err error) (int, error) {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "line ")
	if !ok {
		return 0, err
	}
	num, detail, ok := strings.Cut(rest, ": ")
	n, convErr := strconv.Atoi(num)
	if !ok || convErr != nil {
		return 0, err
	}
	return n, &detailError{msg: detail, err: err}
}

// detailError is an error message with its "line N:" prefix removed that
// still unwraps to the original chain.
type detailError struct {
	msg string
	err error
}

func (e *detailError) Error() string { return e.msg }
func (e *detailError) Unwrap() error { return errors.Unwrap(e.err) }

// addSpan adds a span to its trace in Run.Traces and returns it.
func (l *loader) addSpan(p *Process, line int, in *telfile.Span) *Span {
	s := &Span{
		Process:       p,
		Line:          line,
		TraceID:       in.TraceID,
		SpanID:        in.SpanID,
		ParentSpanID:  in.ParentSpanID,
		Name:          in.Name,
		Kind:          in.Kind,
		Start:         time.Unix(0, in.StartNS).UTC(),
		End:           time.Unix(0, in.EndNS).UTC(),
		Status:        in.Status,
		StatusMessage: in.StatusMessage,
		Attributes:    in.Attributes,
	}
	for _, ln := range in.Links {
		s.Links = append(s.Links, Link{TraceID: ln.TraceID, SpanID: ln.SpanID})
	}
	t := l.run.traceByID[s.TraceID]
	if t == nil {
		t = &Trace{ID: s.TraceID, byID: map[string]*Span{}}
		l.run.traceByID[s.TraceID] = t
		l.run.Traces = append(l.run.Traces, t)
	}
	t.Spans = append(t.Spans, s)
	if _, dup := t.byID[s.SpanID]; !dup {
		t.byID[s.SpanID] = s
	}
	return s
}

func (l *loader) addMetric(p *Process, instance, writer string, m *telfile.Metric) {
	for _, pt := range m.Points {
		key := p.File + "\x00" + writer + "\x00" + m.Name + "\x00" + AttrKey(pt.Attributes)
		s := l.series[key]
		if s == nil {
			s = &Series{Process: p, Instance: instance, Name: m.Name, Unit: m.Unit, Kind: m.Kind,
				Temporality: m.Temporality, Attributes: pt.Attributes}
			l.series[key] = s
			l.run.Series = append(l.run.Series, s)
		}
		t := pt.TimeNS
		if t == 0 {
			t = m.TimeNS
		}
		v := Point{Time: time.Unix(0, t).UTC(), Value: pt.Value.Float64()}
		if pt.StartNS != 0 {
			v.Start = time.Unix(0, pt.StartNS).UTC()
		}
		if m.Kind == telfile.MetricHistogram {
			h := &Histogram{Count: pt.Count, Sum: pt.Sum.Float64(), Bounds: pt.Bounds, Counts: pt.Counts}
			if pt.Min != nil && pt.Max != nil {
				h.Min, h.Max, h.HasMinMax = pt.Min.Float64(), pt.Max.Float64(), true
			}
			if len(h.Counts) != len(h.Bounds)+1 {
				// Not a usable bucket layout: keep count and sum only.
				h.Bounds, h.Counts = nil, nil
			}
			v.Histogram = h
		}
		if m.Temporality == telfile.TemporalityDelta && len(s.Points) > 0 {
			prev := s.Points[len(s.Points)-1]
			v.Value += prev.Value
			if v.Histogram != nil && prev.Histogram != nil {
				if merged, err := MergeHistograms(prev.Histogram, v.Histogram); err == nil {
					v.Histogram = merged
				}
			}
		}
		s.Points = append(s.Points, v)
	}
}

// rolloutJSON is the part of a rollouts.jsonl or failures line the
// report reads: upstream's members and the collector's own. The names
// repeat the rollout package's (KeyBookkeeping, rollout.Bookkeeping,
// rollout.KeyFailureMessage) rather than importing it, so reading a run
// never pulls in OpenTelemetry; a test keeps them in step. A failure's
// message is upstream's _ng_failure_message (the collector writes it,
// as upstream's does), else _ng_failure_error (what collectors before
// it wrote), else a judge's _ng_failure_judge_error.
type rolloutJSON struct {
	TaskIndex      *int            `json:"_ng_task_index"`
	RolloutIndex   *int            `json:"_ng_rollout_index"`
	Reward         *float64        `json:"reward"`
	FailureClass   json.RawMessage `json:"_ng_failure_class"`
	FailureMessage json.RawMessage `json:"_ng_failure_message"`
	FailureError   json.RawMessage `json:"_ng_failure_error"`
	JudgeError     json.RawMessage `json:"_ng_failure_judge_error"`
	Book           *bookkeeping    `json:"_gymlens"`
}

// bookkeeping is the part of rollout.Bookkeeping the report reads.
type bookkeeping struct {
	TraceID    string  `json:"trace_id"`
	RolloutID  string  `json:"rollout_id"`
	DurationMS float64 `json:"duration_ms"`
}

// rollout converts a line of file.
func (r *rolloutJSON) rollout(file string, line int) Rollout {
	ro := Rollout{File: file, Line: line, TaskIndex: -1, RolloutIndex: -1}
	if r.TaskIndex != nil {
		ro.TaskIndex = *r.TaskIndex
		ro.TaskID = strconv.Itoa(*r.TaskIndex)
	}
	if r.RolloutIndex != nil {
		ro.RolloutIndex = *r.RolloutIndex
	}
	if r.Book != nil {
		ro.RolloutID, ro.TraceID, ro.DurationMS = r.Book.RolloutID, r.Book.TraceID, r.Book.DurationMS
	}
	if ro.RolloutID == "" && r.TaskIndex != nil && r.RolloutIndex != nil {
		ro.RolloutID = fmt.Sprintf("%d-%d", *r.TaskIndex, *r.RolloutIndex)
	}
	if r.Reward != nil {
		ro.Reward = *r.Reward
	}
	ro.FailureClass = jsonText(r.FailureClass)
	failed := file == contract.RunFailuresFile || ro.FailureClass != ""
	if failed {
		ro.Error = cmp.Or(jsonText(r.FailureMessage), jsonText(r.FailureError), jsonText(r.JudgeError))
		if ro.Error == "" {
			ro.Error = "failure class " + cmp.Or(ro.FailureClass, "not given")
		}
	}
	ro.Rewarded = !failed && ro.Reward > 0
	return ro
}

// jsonText returns a JSON string's text, another value's JSON, and ""
// for null or nothing.
func jsonText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// readRollouts reads rollouts.jsonl and then the failures file, keeping
// the failure lines no later line supersedes.
func (l *loader) readRollouts() error {
	missing, err := l.readRolloutFile(contract.RunRolloutsFile, func(ro Rollout) { l.run.Rollouts = append(l.run.Rollouts, ro) })
	if err != nil {
		return err
	}
	if missing {
		l.note(contract.RunRolloutsFile, 0, "not found; no rollouts to report")
	}
	completed := map[[2]int]bool{}
	for _, ro := range l.run.Rollouts {
		if ro.TaskIndex >= 0 && ro.RolloutIndex >= 0 {
			completed[[2]int{ro.TaskIndex, ro.RolloutIndex}] = true
		}
	}
	var fails []Rollout
	last := map[[2]int]int{} // rollout -> index in fails of its latest line
	_, err = l.readRolloutFile(contract.RunFailuresFile, func(ro Rollout) {
		if ro.TaskIndex >= 0 && ro.RolloutIndex >= 0 {
			last[[2]int{ro.TaskIndex, ro.RolloutIndex}] = len(fails)
		}
		fails = append(fails, ro)
	})
	if err != nil {
		return err
	}
	for i, ro := range fails {
		k := [2]int{ro.TaskIndex, ro.RolloutIndex}
		if j, ok := last[k]; ok && (j != i || completed[k]) {
			continue
		}
		l.run.Rollouts = append(l.run.Rollouts, ro)
	}
	return nil
}

// readRolloutFile passes every readable line of name to add; missing
// reports a file that does not exist.
func (l *loader) readRolloutFile(name string, add func(Rollout)) (missing bool, err error) {
	path := filepath.Join(l.run.Dir, name)
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true, nil
	case err != nil:
		return false, &FileError{Path: path, Err: pathless(err)}
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for line := 1; ; line++ {
		text, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return false, &FileError{Path: path, Line: line, Err: err}
		}
		complete := bytes.HasSuffix(text, []byte("\n"))
		if trimmed := bytes.TrimSpace(text); len(trimmed) > 0 {
			var r rolloutJSON
			if jerr := json.Unmarshal(trimmed, &r); jerr != nil {
				if !complete {
					l.note(name, line, "last line is cut short (a partially written rollout); skipped")
				} else {
					l.note(name, line, "unreadable rollout line skipped: %v", jerr)
				}
			} else {
				add(r.rollout(name, line))
			}
		}
		if err != nil { // io.EOF
			return false, nil
		}
	}
}

// finish sorts everything and fills the derived fields.
func (l *loader) finish() {
	run := l.run
	widen := func(t time.Time) {
		if !t.IsZero() {
			l.widen(t.UnixNano())
		}
	}
	// The traces' extents are in l.start and l.end already: the first
	// pass saw every span.
	for _, t := range run.Traces {
		sort.SliceStable(t.Spans, func(i, j int) bool {
			a, b := t.Spans[i], t.Spans[j]
			if !a.Start.Equal(b.Start) {
				return a.Start.Before(b.Start)
			}
			return a.SpanID < b.SpanID
		})
		for i, s := range t.Spans {
			if i == 0 || s.Start.Before(t.Start) {
				t.Start = s.Start
			}
			if i == 0 || s.End.After(t.End) {
				t.End = s.End
			}
		}
	}
	sort.SliceStable(run.Traces, func(i, j int) bool {
		a, b := run.Traces[i], run.Traces[j]
		if !a.Start.Equal(b.Start) {
			return a.Start.Before(b.Start)
		}
		return a.ID < b.ID
	})
	for _, s := range run.Series {
		for _, p := range s.Points {
			widen(p.Time)
		}
	}
	sort.SliceStable(run.Series, func(i, j int) bool {
		a, b := run.Series[i], run.Series[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Process.File != b.Process.File {
			return a.Process.File < b.Process.File
		}
		if a.Instance != b.Instance {
			return a.Instance < b.Instance
		}
		return AttrKey(a.Attributes) < AttrKey(b.Attributes)
	})
	if l.start != 0 {
		run.Start = time.Unix(0, l.start).UTC()
		run.End = time.Unix(0, l.end).UTC()
	}

	switch {
	case run.Config != nil && run.Config.RunID != "":
		run.ID = run.Config.RunID
	default:
		for _, p := range run.Processes {
			if p.RunID != "" {
				run.ID = p.RunID
				break
			}
		}
	}
	if run.ID == "" {
		run.ID = filepath.Base(filepath.Clean(run.Dir))
	}
}

// pathless drops the path from an *fs.PathError, which FileError names
// already.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
