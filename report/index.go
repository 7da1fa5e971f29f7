package report

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
)

// A run of a hundred thousand rollouts holds some 700 000 spans, and a
// span with its attributes takes about a kilobyte of memory once decoded.
// So Load reads the telemetry twice:
//
//  1. Every line is decoded and checked, and each span leaves only a few
//     numbers behind: its duration (for the exact percentiles), its place
//     in the files and its ids (for finding broken traces), the extent of
//     its trace. The slowest rollout spans are picked on the way, and so
//     is the gym.job span whose duration the report's header shows.
//  2. Only the lines of the traces a report draws are decoded again and
//     kept in full: the slowest rollouts and the targets of their links
//     (the collection's gym.job span, in a run of gym). The spans whose
//     parent is missing are decoded again too, to describe the problem.
//
// Ids are compared as numbers in the first pass. The format writes them in
// lowercase hex, but a file from another exporter or edited by hand may
// hold anything; such ids are numbered as they come (see
// collector.spanNumber), so that no trace needs its spans decoded to be
// checked, whatever its ids look like.
//
// The numbers of the first pass are dropped once the Run is built, except
// the durations.

// spanIndex is what a Run read by Load knows about the spans it does not
// hold in full. A Run made by hand has the zero spanIndex: no span read.
type spanIndex struct {
	// traces and spans count every trace id and every span read.
	traces, spans int
	// durations holds the duration of every span, by process and span
	// name, in reading order.
	durations map[durationKey][]time.Duration
	// slowest are the kept slowest gym.rollout spans in SlowestRollouts
	// order (agents' spans only when some process is an agent).
	slowest []*Span
	// broken lists the first maxProblemsPerKind broken-trace problems of
	// the whole run (what a report shows); brokenUnlisted counts the rest.
	// A run whose spans mostly lost their parents (a full export queue, a
	// caller outside the fleet) would otherwise hold a problem per span.
	broken         []Problem
	brokenUnlisted int
	// job is the duration of the run's first gym.job span (in Run.Traces
	// order, as if every trace were held); hasJob is set when there is one.
	job    time.Duration
	hasJob bool
}

type durationKey struct {
	process *Process
	name    string
}

// spanRef is what the first pass keeps of one span: 32 bytes.
type spanRef struct {
	// id and parent are the span and parent span ids as numbers (see
	// collector.spanNumber).
	id, parent uint64
	// trace indexes collector.traces; file indexes Run.Processes; line is
	// the 1-based line in that file.
	trace, file, line uint32
	// flags marks a root span and says which numbering id and parent are
	// in.
	flags refFlags
}

// refFlags describe a spanRef's ids.
type refFlags uint8

const (
	// refRoot marks a span that names no parent.
	refRoot refFlags = 1 << iota
	// refOddID and refOddParent mark an id or parent that was not in
	// canonical form, so its number is one collector.oddSpanIDs gave.
	refOddID
	refOddParent
)

// spanKey is a span id as the first pass compares it. Two ids are equal as
// strings exactly when their keys are: a canonical id is its own value, an
// odd one a number given out in another space, which odd tells apart.
type spanKey struct {
	trace uint32
	odd   bool
	n     uint64
}

// key returns the key of the span's own id.
func (r *spanRef) key() spanKey { return spanKey{r.trace, r.flags&refOddID != 0, r.id} }

// parentKey returns the key of the span's parent id.
func (r *spanRef) parentKey() spanKey { return spanKey{r.trace, r.flags&refOddParent != 0, r.parent} }

// compare orders keys by trace, then canonical before odd, then number.
func (a spanKey) compare(b spanKey) int {
	return cmp.Or(cmp.Compare(a.trace, b.trace), compareBool(a.odd, b.odd), cmp.Compare(a.n, b.n))
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

// traceSum is what the first pass keeps of one trace.
type traceSum struct {
	// start is the earliest span start and end the latest span end, in
	// Unix nanoseconds.
	start, end int64
	// id is the trace id when it is in canonical form (32 lowercase hex
	// digits); otherwise collector.oddTraceIDs has it.
	id [16]byte
}

// rankEntry is a gym.rollout span competing for a place among the
// slowest, with everything the ranking looks at.
type rankEntry struct {
	dur, start        int64
	trace, file, line uint32
	spanID            string
}

// jobSpan is what the first pass keeps of a gym.job span.
type jobSpan struct {
	start  int64
	spanID string
	dur    time.Duration
}

// collector gathers the first pass.
type collector struct {
	run  *Run
	keep int

	// ids finds canonical trace ids, oddIDs the others; oddTraceIDs
	// spells the latter back.
	ids         map[[16]byte]uint32
	oddIDs      map[string]uint32
	oddTraceIDs map[uint32]string
	traces      []traceSum
	// oddSpanIDs numbers the span ids (own or parent) that are not 16
	// lowercase hex digits, in the order met. It costs a map entry per
	// distinct odd id, but only while the first pass runs.
	oddSpanIDs map[string]uint64

	refs []spanRef
	// fileRefs[f] is the range of refs read from file f.
	fileRefs [][2]int
	// jobs holds, by trace, the gym.job span that comes first in the
	// trace's own order (start time, then span id, then reading order).
	jobs map[uint32]jobSpan
	// slowest holds one heap of rollout spans per file.
	slowest []*rankHeap

	durations map[durationKey][]time.Duration
}

func newCollector(run *Run, keep int) *collector {
	return &collector{
		run: run, keep: max(keep, 0),
		ids: map[[16]byte]uint32{}, oddIDs: map[string]uint32{}, oddTraceIDs: map[uint32]string{},
		oddSpanIDs: map[string]uint64{}, jobs: map[uint32]jobSpan{},
		durations: map[durationKey][]time.Duration{},
	}
}

// startFile is called before the spans of the file with index f (the
// process just appended to Run.Processes) are added.
func (c *collector) startFile() {
	n := len(c.refs)
	c.fileRefs = append(c.fileRefs, [2]int{n, n})
	c.slowest = append(c.slowest, &rankHeap{c: c})
}

// add takes one span of the file being read.
func (c *collector) add(p *Process, line int, s *telfile.Span) {
	f := len(c.fileRefs) - 1
	ti, fresh := c.traceIndex(s.TraceID)
	ts := &c.traces[ti]
	if fresh {
		ts.start, ts.end = s.StartNS, s.EndNS
	} else {
		ts.start = min(ts.start, s.StartNS)
		ts.end = max(ts.end, s.EndNS)
	}

	ref := spanRef{trace: ti, file: uint32(f), line: uint32(line)}
	var odd bool
	if ref.id, odd = c.spanNumber(s.SpanID); odd {
		ref.flags |= refOddID
	}
	if s.ParentSpanID == "" {
		ref.flags |= refRoot
	} else if ref.parent, odd = c.spanNumber(s.ParentSpanID); odd {
		ref.flags |= refOddParent
	}
	c.refs = append(c.refs, ref)
	c.fileRefs[f][1] = len(c.refs)

	// time.Time's Sub, as Span.Duration computes it, saturates instead
	// of overflowing.
	d := time.Unix(0, s.EndNS).Sub(time.Unix(0, s.StartNS))
	key := durationKey{p, s.Name}
	c.durations[key] = append(c.durations[key], d)

	switch s.Name {
	case contract.SpanJob:
		// Ties keep the span read first, as the stable sort of a trace's
		// spans does.
		j, seen := c.jobs[ti]
		if !seen || s.StartNS < j.start || s.StartNS == j.start && s.SpanID < j.spanID {
			c.jobs[ti] = jobSpan{start: s.StartNS, spanID: s.SpanID, dur: d}
		}
	case contract.SpanRollout:
		if c.keep > 0 {
			c.slowest[f].offer(rankEntry{dur: int64(d), start: s.StartNS, trace: ti, file: uint32(f),
				line: uint32(line), spanID: s.SpanID})
		}
	}
}

// spanNumber returns the number a span id is compared by, and whether it
// is odd. A canonical id (16 lowercase hex digits) is its own value; any
// other string gets the next number of a second numbering, kept apart by
// the odd flag, so it can equal no canonical id. The same string always
// gets the same number, which is all that finding a parent needs. An id in
// uppercase hex is odd: the format writes lowercase, and the full reading
// of a trace (Trace.Span) compares ids as strings, so it is another id
// than its lowercase spelling.
func (c *collector) spanNumber(id string) (uint64, bool) {
	if v, ok := parseHex64(id); ok {
		return v, false
	}
	n, ok := c.oddSpanIDs[id]
	if !ok {
		n = uint64(len(c.oddSpanIDs))
		c.oddSpanIDs[id] = n
	}
	return n, true
}

// traceIndex returns the index of the trace with the given id, adding it
// when it is new.
func (c *collector) traceIndex(id string) (uint32, bool) {
	if b, ok := parseHex128(id); ok {
		if i, ok := c.ids[b]; ok {
			return i, false
		}
		i := uint32(len(c.traces))
		c.ids[b] = i
		c.traces = append(c.traces, traceSum{id: b})
		return i, true
	}
	if i, ok := c.oddIDs[id]; ok {
		return i, false
	}
	i := uint32(len(c.traces))
	c.oddIDs[id] = i
	c.oddTraceIDs[i] = id
	c.traces = append(c.traces, traceSum{})
	return i, true
}

// lookup returns the index of the trace with the given id, if read.
func (c *collector) lookup(id string) (uint32, bool) {
	if b, ok := parseHex128(id); ok {
		i, ok := c.ids[b]
		return i, ok
	}
	i, ok := c.oddIDs[id]
	return i, ok
}

// traceID returns the id of trace i as written in the files.
func (c *collector) traceID(i uint32) string {
	if s, ok := c.oddTraceIDs[i]; ok {
		return s
	}
	return hex.EncodeToString(c.traces[i].id[:])
}

// compareTraceIDs orders two traces by their ids as strings.
func (c *collector) compareTraceIDs(a, b uint32) int {
	if a == b {
		return 0
	}
	if len(c.oddTraceIDs) == 0 {
		// Lowercase hex digits sort like the bytes they encode.
		return bytes.Compare(c.traces[a].id[:], c.traces[b].id[:])
	}
	return strings.Compare(c.traceID(a), c.traceID(b))
}

// compareRank orders rollout spans the way SlowestRollouts lists them:
// longest first, then by trace id and span id, then in the order the
// spans sit in their trace (start time, then file order).
func (c *collector) compareRank(a, b rankEntry) int {
	// The trace ids are compared only on a tie: for ids not in canonical
	// form that spells both out.
	if d := cmp.Compare(b.dur, a.dur); d != 0 { // longest first
		return d
	}
	return cmp.Or(
		c.compareTraceIDs(a.trace, b.trace),
		strings.Compare(a.spanID, b.spanID),
		cmp.Compare(a.start, b.start),
		cmp.Compare(a.file, b.file),
		cmp.Compare(a.line, b.line),
	)
}

// rankHeap keeps the collector.keep best-ranked entries offered to it,
// the worst of them on top.
type rankHeap struct {
	c *collector
	e []rankEntry
}

// Len, Less, Swap, Push and Pop make rankHeap a heap.Interface; Less puts
// the worse-ranked entry first, so the root is the one to drop.

// Len returns the number of entries.
func (h *rankHeap) Len() int { return len(h.e) }

// Less reports whether entry i ranks after entry j.
func (h *rankHeap) Less(i, j int) bool { return h.c.compareRank(h.e[i], h.e[j]) > 0 }

// Swap exchanges entries i and j.
func (h *rankHeap) Swap(i, j int) { h.e[i], h.e[j] = h.e[j], h.e[i] }

// Push appends x, a rankEntry.
func (h *rankHeap) Push(x any) { h.e = append(h.e, x.(rankEntry)) }

// Pop removes and returns the last entry.
func (h *rankHeap) Pop() any {
	x := h.e[len(h.e)-1]
	h.e = h.e[:len(h.e)-1]
	return x
}

// offer keeps x if it ranks among the best collector.keep entries seen.
func (h *rankHeap) offer(x rankEntry) {
	switch {
	case len(h.e) < h.c.keep:
		heap.Push(h, x)
	case h.c.compareRank(x, h.e[0]) < 0:
		h.e[0] = x
		heap.Fix(h, 0)
	}
}

// slowestEntries merges the heaps of the files SlowestRollouts looks at
// (the agents', or every file when no process is an agent) into the kept
// slowest rollout spans, in order.
func (c *collector) slowestEntries() []rankEntry {
	agents := haveAgent(c.run.Processes)
	var all []rankEntry
	for f, h := range c.slowest {
		if !agents || c.run.Processes[f].ServerType == contract.ServerTypeAgent {
			all = append(all, h.e...)
		}
	}
	slices.SortFunc(all, c.compareRank)
	return all[:min(len(all), c.keep)]
}

// detailTraces marks the traces to load in full: the slowest rollouts'.
func (c *collector) detailTraces(slowest []rankEntry) []bool {
	want := make([]bool, len(c.traces))
	for _, e := range slowest {
		want[e.trace] = true
	}
	return want
}

// firstJob returns the gym.job span that Run.Traces would list first if
// it held every trace: the one of the earliest trace (ties by trace id).
func (c *collector) firstJob() (jobSpan, bool) {
	best, found := uint32(0), false
	for ti := range c.jobs {
		if !found || c.traces[ti].start < c.traces[best].start ||
			c.traces[ti].start == c.traces[best].start && c.compareTraceIDs(ti, best) < 0 {
			best, found = ti, true
		}
	}
	return c.jobs[best], found
}

// orphans returns the refs (as indexes, ascending) of the spans whose
// parent no span of their trace has.
func (c *collector) orphans() []int {
	order := make([]uint32, len(c.refs))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int {
		return c.refs[a].key().compare(c.refs[b].key())
	})
	var out []int
	for i := range c.refs {
		r := &c.refs[i]
		if r.flags&refRoot != 0 {
			continue
		}
		_, found := slices.BinarySearchFunc(order, r.parentKey(), func(o uint32, want spanKey) int {
			return c.refs[o].key().compare(want)
		})
		if !found {
			out = append(out, i)
		}
	}
	return out
}

// spanPos is a span's place in the run directory.
type spanPos struct{ file, line uint32 }

// detailLoader reads spans back from the telemetry files by position.
type detailLoader struct {
	l *loader
	c *collector
	// byPos finds the spans loaded in full.
	byPos map[spanPos]*Span
	// broken collects the broken-trace problems found from the refs.
	broken []Problem
}

// load reads the spans of the traces marked in want, adding them to the
// Run, and the spans of the refs listed in orphans (ascending), turning
// them into broken-trace problems. It touches only the files that hold
// such spans and decodes only their lines.
func (d *detailLoader) load(want []bool, orphans []int) error {
	type job struct {
		line           uint32
		trace          uint32
		detail, orphan bool
	}
	for f, rng := range d.c.fileRefs {
		var jobs []job
		for i := rng[0]; i < rng[1]; i++ {
			r := d.c.refs[i]
			orphan := len(orphans) > 0 && orphans[0] == i
			if orphan {
				orphans = orphans[1:]
			}
			if want[r.trace] || orphan {
				jobs = append(jobs, job{line: r.line, trace: r.trace, detail: want[r.trace], orphan: orphan})
			}
		}
		if len(jobs) == 0 {
			continue
		}
		p := d.l.run.Processes[f]
		err := d.scan(p, func(line uint32, text []byte) (bool, error) {
			if jobs[0].line != line {
				return true, nil
			}
			j := jobs[0]
			jobs = jobs[1:]
			var in telfile.Span
			if err := json.Unmarshal(text, &in); err != nil {
				return false, fmt.Errorf("bad span record on second reading: %w", err)
			}
			if want := d.c.traceID(j.trace); in.TraceID != want {
				return false, fmt.Errorf("span of trace %s where the first reading found trace %s; the file changed while it was read", in.TraceID, want)
			}
			if j.detail {
				s := d.l.addSpan(p, int(line), &in)
				d.byPos[spanPos{uint32(f), line}] = s
			}
			if j.orphan {
				d.broken = append(d.broken, brokenTraceProblem(p, int(line), in.TraceID, in.SpanID,
					in.ParentSpanID, in.Kind, in.Name))
			}
			return len(jobs) > 0, nil
		})
		if err != nil {
			return err
		}
		if len(jobs) > 0 {
			return &FileError{Path: filepath.Join(d.l.run.Dir, contract.RunTelemetryDir, p.File), Line: int(jobs[0].line),
				Err: errors.New("line gone on second reading; the file changed while it was read")}
		}
	}
	return nil
}

// scan calls fn with every line of the process's telemetry file, numbered
// as telfile.Read numbers them, until fn returns false or an error.
func (d *detailLoader) scan(p *Process, fn func(line uint32, text []byte) (bool, error)) error {
	path := filepath.Join(d.l.run.Dir, contract.RunTelemetryDir, p.File)
	f, err := os.Open(path)
	if err != nil {
		return &FileError{Path: path, Err: pathless(err)}
	}
	defer f.Close()
	sc := telfile.NewScanner(f)
	for sc.Scan() {
		more, err := fn(uint32(sc.Line()), sc.Bytes())
		if err != nil {
			return &FileError{Path: path, Line: sc.Line(), Err: err}
		}
		if !more {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return &FileError{Path: path, Line: sc.Line() + 1, Err: err}
	}
	return nil
}

// linkedTraces marks the traces that spans loaded in full link to and
// that are not loaded yet; it returns nil when there are none.
func (d *detailLoader) linkedTraces(want []bool) []bool {
	var more []bool
	for _, t := range d.l.run.Traces {
		for _, s := range t.Spans {
			for _, ln := range s.Links {
				ti, ok := d.c.lookup(ln.TraceID)
				if !ok || want[ti] || more != nil && more[ti] {
					continue
				}
				if more == nil {
					more = make([]bool, len(want))
				}
				more[ti] = true
			}
		}
	}
	return more
}

// buildIndex runs the second pass and returns the index the Run keeps.
func (c *collector) buildIndex(l *loader) (*spanIndex, error) {
	slowest := c.slowestEntries()
	want := c.detailTraces(slowest)
	orphans := c.orphans()
	// Refs run in file and line order, the order Problems sorts broken
	// traces in, so the first ones are the ones a report lists.
	unlisted := max(0, len(orphans)-maxProblemsPerKind)
	orphans = orphans[:len(orphans)-unlisted]
	d := &detailLoader{l: l, c: c, byPos: map[spanPos]*Span{}}
	if err := d.load(want, orphans); err != nil {
		return nil, err
	}
	// A waterfall names the span each of its spans links to.
	if more := d.linkedTraces(want); more != nil {
		if err := d.load(more, nil); err != nil {
			return nil, err
		}
	}
	idx := &spanIndex{traces: len(c.traces), spans: len(c.refs), broken: d.broken, brokenUnlisted: unlisted,
		durations: make(map[durationKey][]time.Duration, len(c.durations))}
	if j, ok := c.firstJob(); ok {
		idx.job, idx.hasJob = j.dur, true
	}
	for _, e := range slowest {
		s := d.byPos[spanPos{e.file, e.line}]
		if s == nil {
			return nil, fmt.Errorf("%s: span of line %d not found on second reading",
				filepath.Join(l.run.Dir, contract.RunTelemetryDir, l.run.Processes[e.file].File), e.line)
		}
		idx.slowest = append(idx.slowest, s)
	}
	for k, ds := range c.durations {
		// A copy of the right size: append leaves up to a quarter unused.
		// Not sorted here: SpanDurations sorts what it joins, and only the
		// few names a report asks for are ever joined.
		idx.durations[k] = slices.Clone(ds)
		delete(c.durations, k)
	}
	return idx, nil
}

// brokenTraceProblem describes a span whose parent no process exported.
func brokenTraceProblem(p *Process, line int, traceID, spanID, parentID, kind, name string) Problem {
	return Problem{
		Kind: ProblemBrokenTrace, File: telemetryPath(p), Line: line,
		TraceID: traceID, SpanID: spanID,
		Message: fmt.Sprintf("trace %s: %s span %q of %s names parent %s, which no process exported",
			traceID, kind, name, p.Name(), parentID),
	}
}

// haveAgent reports whether some process says it is an agent.
func haveAgent(procs []*Process) bool {
	for _, p := range procs {
		if p.ServerType == contract.ServerTypeAgent {
			return true
		}
	}
	return false
}

// parseHex64 reads a span id written as 16 lowercase hex digits.
func parseHex64(s string) (uint64, bool) {
	if len(s) != 16 {
		return 0, false
	}
	var v uint64
	for i := 0; i < 16; i++ {
		n, ok := hexDigit(s[i])
		if !ok {
			return 0, false
		}
		v = v<<4 | uint64(n)
	}
	return v, true
}

// parseHex128 reads a trace id written as 32 lowercase hex digits.
func parseHex128(s string) ([16]byte, bool) {
	var b [16]byte
	if len(s) != 32 {
		return b, false
	}
	for i := range b {
		hi, ok1 := hexDigit(s[2*i])
		lo, ok2 := hexDigit(s[2*i+1])
		if !ok1 || !ok2 {
			return b, false
		}
		b[i] = hi<<4 | lo
	}
	return b, true
}

// hexDigit accepts lowercase hex digits only, so that each id has one
// spelling and two spellings never meet in one number.
func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
