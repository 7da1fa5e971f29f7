package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
)

// writeSyntheticRun writes a run directory of n rollouts into dir, made
// from the fixture: every rollout copies one of the fixture's rollout
// traces (spans of all four processes) under fresh trace and span ids,
// moved later in time and, with stretch set, stretched by a random factor,
// so durations differ and the slowest rollouts are a real selection
// (without it, the copies of one template tie). The fixture's
// headers, metric records, config.yaml and gym.job trace are kept as they
// are, and every synthetic rollout links to that gym.job span as in a real
// run. It returns the number of spans written.
func writeSyntheticRun(tb testing.TB, dir string, n int, seed uint64, stretch bool) int {
	tb.Helper()
	src, err := Load(fixture)
	if err != nil {
		tb.Fatalf("load the fixture: %v", err)
	}
	type template struct {
		rollout Rollout
		spans   map[string][]telfile.Span // by process file
		start   int64
	}
	var templates []template
	jobSpans := map[string][]telfile.Span{}
	for _, ro := range src.Rollouts {
		templates = append(templates, template{rollout: ro, spans: map[string][]telfile.Span{}})
	}
	byTrace := map[string]int{}
	for i, tp := range templates {
		byTrace[tp.rollout.TraceID] = i
	}
	for _, p := range src.Processes {
		err := telfile.ReadFile(filepath.Join(fixture, contract.RunTelemetryDir, p.File), func(rec telfile.Record) error {
			if rec.Span == nil {
				return nil
			}
			if i, ok := byTrace[rec.Span.TraceID]; ok {
				t := &templates[i]
				t.spans[p.File] = append(t.spans[p.File], *rec.Span)
				if t.start == 0 || rec.Span.StartNS < t.start {
					t.start = rec.Span.StartNS
				}
			} else {
				jobSpans[p.File] = append(jobSpans[p.File], *rec.Span)
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}

	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	type plan struct {
		tmpl    int
		traceID string
		offset  int64   // start of the synthetic rollout, Unix ns
		stretch float64 // duration factor
	}
	base := templates[0].start
	plans := make([]plan, n)
	for i := range plans {
		plans[i] = plan{
			tmpl:    i % len(templates),
			traceID: fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()),
			offset:  base + int64(i)*int64(50*time.Microsecond),
			stretch: 1,
		}
		if stretch {
			plans[i].stretch = 0.5 + 1.5*rng.Float64()
		}
	}
	newID := func(traceID, old string) string {
		h := fnv.New64a()
		h.Write([]byte(traceID))
		h.Write([]byte(old))
		return fmt.Sprintf("%016x", h.Sum64())
	}
	rolloutID := func(i int) string { return fmt.Sprintf("r%015d", i) }

	if err := os.MkdirAll(filepath.Join(dir, contract.RunTelemetryDir), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(fixture)); err != nil {
		tb.Fatal(err)
	}
	spans := 0
	for _, p := range src.Processes {
		// Headers and metric records come from the fixture file as they
		// are; the spans are replaced.
		raw, err := os.ReadFile(filepath.Join(fixture, contract.RunTelemetryDir, p.File))
		if err != nil {
			tb.Fatal(err)
		}
		var head, tail bytes.Buffer
		for line := range bytes.Lines(raw) {
			switch {
			case bytes.Contains(line, []byte(`"type":"span"`)):
			case bytes.Contains(line, []byte(`"type":"resource"`)):
				head.Write(line)
			default:
				tail.Write(line)
			}
		}
		f, err := os.Create(filepath.Join(dir, contract.RunTelemetryDir, p.File))
		if err != nil {
			tb.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		w.Write(head.Bytes())
		var buf []byte
		write := func(s telfile.Span) {
			if buf, err = telfile.AppendLine(buf[:0], s); err != nil {
				tb.Fatal(err)
			}
			w.Write(buf)
			spans++
		}
		for _, s := range jobSpans[p.File] {
			write(s)
		}
		for i, pl := range plans {
			t := templates[pl.tmpl]
			for _, s := range t.spans[p.File] {
				s.TraceID = pl.traceID
				s.SpanID = newID(pl.traceID, s.SpanID)
				if s.ParentSpanID != "" {
					s.ParentSpanID = newID(pl.traceID, s.ParentSpanID)
				}
				s.StartNS = pl.offset + int64(float64(s.StartNS-t.start)*pl.stretch)
				s.EndNS = pl.offset + int64(float64(s.EndNS-t.start)*pl.stretch)
				if _, ok := s.Attributes[contract.AttrRolloutID]; ok {
					attrs := make(map[string]any, len(s.Attributes))
					for k, v := range s.Attributes {
						attrs[k] = v
					}
					attrs[contract.AttrRolloutID] = rolloutID(i)
					s.Attributes = attrs
				}
				write(s)
			}
		}
		w.Write(tail.Bytes())
		if err := w.Flush(); err != nil {
			tb.Fatal(err)
		}
		if err := f.Close(); err != nil {
			tb.Fatal(err)
		}
	}

	// rollouts.jsonl and its failures file: the template's line with the
	// new ids and duration.
	files := map[string]*bufio.Writer{}
	var closers []*os.File
	for _, name := range []string{contract.RunRolloutsFile, contract.RunFailuresFile} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			tb.Fatal(err)
		}
		closers = append(closers, f)
		files[name] = bufio.NewWriterSize(f, 1<<20)
	}
	for i, pl := range plans {
		ro := templates[pl.tmpl].rollout
		line := map[string]any{
			"_ng_task_index": i, "_ng_rollout_index": 0, "reward": ro.Reward,
			KeyBookkeeping: map[string]any{"trace_id": pl.traceID, "rollout_id": rolloutID(i), "duration_ms": ro.DurationMS * pl.stretch},
		}
		if ro.Failed() {
			line["_ng_failure_class"] = ro.FailureClass
			line["_ng_failure_error"] = ro.Error
		}
		b, err := json.Marshal(line)
		if err != nil {
			tb.Fatal(err)
		}
		w := files[ro.File]
		w.Write(b)
		w.WriteByte('\n')
	}
	for i, name := range []string{contract.RunRolloutsFile, contract.RunFailuresFile} {
		if err := files[name].Flush(); err != nil {
			tb.Fatal(err)
		}
		if err := closers[i].Close(); err != nil {
			tb.Fatal(err)
		}
	}
	return spans
}

// liveHeap returns the bytes of heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkLoad loads a synthetic run of 20 000 rollouts (about 200 000
// spans) and reports the time per span, the heap still in use after Load
// with the Run reachable, per span and in total, and the peak heap seen
// while loading (sampled by a goroutine, so an underestimate).
//
//	go test ./report -run '^$' -bench Load -benchtime 3x
func BenchmarkLoad(b *testing.B) {
	const rollouts = 20_000
	dir := filepath.Join(b.TempDir(), "run-synthetic")
	spans := writeSyntheticRun(b, dir, rollouts, 1, true)
	base := liveHeap()
	var live, peak uint64
	b.ResetTimer()
	for b.Loop() {
		stop := make(chan struct{})
		done := make(chan uint64)
		go func() { done <- samplePeak(stop) }()
		run, err := Load(dir)
		close(stop)
		p := <-done
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if n := run.SpanCount(); n != spans {
			b.Fatalf("loaded %d spans, wrote %d", n, spans)
		}
		live = max(live, liveHeap()-base)
		peak = max(peak, p-base)
		runtime.KeepAlive(run)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(spans), "ns/span")
	b.ReportMetric(float64(live)/float64(spans), "live-B/span")
	b.ReportMetric(float64(live)/(1<<20), "live-MB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
}

// samplePeak reads the bytes of heap objects (live and not yet swept)
// every two milliseconds until stop is closed and returns the largest
// reading. runtime/metrics does not stop the world, so sampling barely
// disturbs the load being measured.
func samplePeak(stop <-chan struct{}) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		metrics.Read(sample)
		peak = max(peak, sample[0].Value.Uint64())
		select {
		case <-stop:
			return peak
		case <-tick.C:
		}
	}
}
