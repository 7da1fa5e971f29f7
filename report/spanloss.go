package report

import (
	"fmt"
	"strings"

	"github.com/gymlens/gymlens/contract"
)

// SpanLoss is one process's span account, as its telemetry wrote it when
// it shut down (contract.SDKSpanProcessed and contract.SDKSpanExported),
// summed over its exporters and over every process that appended to its
// file. A process killed before it could write one has none.
type SpanLoss struct {
	// Process is the telemetry file the account was read from.
	Process *Process
	// Spans counts the sampled spans the process ended, once per exporter.
	Spans uint64
	// QueueFull, Unflushed and ExportFailed count the lost spans by cause:
	// dropped because an export queue was full, still queued when
	// shutdown ran out of time, and in exports that failed.
	QueueFull, Unflushed, ExportFailed uint64
}

// Lost returns how many spans never reached their destination.
func (l SpanLoss) Lost() uint64 { return l.QueueFull + l.Unflushed + l.ExportFailed }

// Fraction returns Lost as a fraction of Spans (0 for no spans).
func (l SpanLoss) Fraction() float64 {
	if l.Spans == 0 {
		return 0
	}
	return float64(l.Lost()) / float64(l.Spans)
}

// String is the account in one line: "telemetry lost 3 spans (0.25%) of
// 1200: 3 in failed exports".
func (l SpanLoss) String() string {
	return lossText("spans", lossCounts{l.Spans, l.QueueFull, l.Unflushed, l.ExportFailed})
}

// The signals besides spans that a process accounts for (see SignalLoss).
const (
	SignalMetricPoints = "metric data points"
	SignalLogRecords   = "log records"
)

// SignalLoss is one process's account of its metric data points
// (contract.SDKMetricPointExported) or its log records
// (contract.SDKLogProcessed and SDKLogExported), read as SpanLoss reads
// spans. Metric points are counted per export: each export carries every
// cumulative point again.
type SignalLoss struct {
	// Process is the telemetry file the account was read from.
	Process *Process
	// Signal is SignalMetricPoints or SignalLogRecords.
	Signal string
	// Total counts the items accounted for; QueueFull, Unflushed and
	// ExportFailed the lost ones by cause, as in SpanLoss (metric points
	// are only ever lost in failed exports).
	Total, QueueFull, Unflushed, ExportFailed uint64
}

// Lost returns how many items never reached their destination.
func (l SignalLoss) Lost() uint64 { return l.QueueFull + l.Unflushed + l.ExportFailed }

// String is the account in one line, as SpanLoss's.
func (l SignalLoss) String() string {
	return lossText(l.Signal, lossCounts{l.Total, l.QueueFull, l.Unflushed, l.ExportFailed})
}

// lossCounts is one process's account of one signal.
type lossCounts struct{ total, queueFull, unflushed, exportFailed uint64 }

// lossText says what became of a process's items of one signal, what
// naming them ("spans", "log records").
func lossText(what string, c lossCounts) string {
	lost := c.queueFull + c.unflushed + c.exportFailed
	if lost == 0 {
		return fmt.Sprintf("telemetry lost no %s (%d accounted for)", what, c.total)
	}
	var causes []string
	for _, cause := range []struct {
		n    uint64
		what string
	}{{c.queueFull, "dropped with the export queue full"}, {c.exportFailed, "in failed exports"}, {c.unflushed, "still queued at shutdown"}} {
		if cause.n > 0 {
			causes = append(causes, fmt.Sprintf("%d %s", cause.n, cause.what))
		}
	}
	frac := 0.0
	if c.total > 0 {
		frac = float64(lost) / float64(c.total)
	}
	return fmt.Sprintf("telemetry lost %d %s (%s) of %d: %s", lost, what, percentText(frac), c.total, strings.Join(causes, ", "))
}

// percentText shows a fraction as a percentage with enough digits that a
// loss is never shown as 0%.
func percentText(f float64) string {
	switch p := f * 100; {
	case p == 0 || p >= 10:
		return fmt.Sprintf("%.0f%%", p)
	case p >= 0.1:
		return fmt.Sprintf("%.1f%%", p)
	default:
		return fmt.Sprintf("%.2g%%", p)
	}
}

// SpanLosses returns the span account of every process that wrote one, in
// process order.
func (r *Run) SpanLosses() []SpanLoss {
	var out []SpanLoss
	for _, a := range r.accounts(contract.SDKSpanProcessed, contract.SDKSpanExported) {
		out = append(out, SpanLoss{Process: a.proc, Spans: a.total, QueueFull: a.queueFull, Unflushed: a.unflushed, ExportFailed: a.exportFailed})
	}
	return out
}

// SignalLosses returns the account of signal (SignalMetricPoints or
// SignalLogRecords) of every process that wrote one, in process order.
func (r *Run) SignalLosses(signal string) []SignalLoss {
	var processed, exported string
	switch signal {
	case SignalMetricPoints:
		exported = contract.SDKMetricPointExported
	case SignalLogRecords:
		processed, exported = contract.SDKLogProcessed, contract.SDKLogExported
	default:
		return nil
	}
	var out []SignalLoss
	for _, a := range r.accounts(processed, exported) {
		out = append(out, SignalLoss{Process: a.proc, Signal: signal, Total: a.total, QueueFull: a.queueFull, Unflushed: a.unflushed, ExportFailed: a.exportFailed})
	}
	return out
}

type processAccount struct {
	proc *Process
	lossCounts
}

// accounts sums the account counters of every process that wrote them:
// processed counts every item by outcome (queue full, unflushed, or
// passed on), exported the items passed on (failed, or delivered). A
// signal without a processor counter ("") takes its total from exported.
func (r *Run) accounts(processed, exported string) []processAccount {
	byProc := map[*Process]*processAccount{}
	get := func(p *Process) *processAccount {
		a := byProc[p]
		if a == nil {
			a = &processAccount{proc: p}
			byProc[p] = a
		}
		return a
	}
	if processed != "" {
		for _, s := range r.SeriesNamed(processed) {
			a, v := get(s.Process), uint64(max(s.Last().Value, 0))
			a.total += v
			switch s.Attr(contract.AttrErrorType) {
			case contract.SpanLossQueueFull:
				a.queueFull += v
			case contract.SpanLossUnflushed:
				a.unflushed += v
			}
		}
	}
	for _, s := range r.SeriesNamed(exported) {
		a, v := get(s.Process), uint64(max(s.Last().Value, 0))
		if processed == "" {
			a.total += v
		}
		if s.Attr(contract.AttrErrorType) != "" {
			a.exportFailed += v
		}
	}
	out := make([]processAccount, 0, len(byProc))
	for _, p := range r.Processes {
		if a := byProc[p]; a != nil {
			out = append(out, *a)
		}
	}
	return out
}

// CheckSpanLoss returns an error naming every process whose telemetry lost
// more than limit (a fraction) of its spans, nil when none did.
func (s Summary) CheckSpanLoss(limit float64) error {
	var over []string
	for _, l := range s.SpanLosses {
		if l.Lost() > 0 && l.Fraction() > limit {
			over = append(over, fmt.Sprintf("%s: %s", l.Process.Name(), l))
		}
	}
	if len(over) == 0 {
		return nil
	}
	return fmt.Errorf("telemetry lost more than %s of the spans of %d process(es), so the run's traces are incomplete:\n  %s",
		percentText(limit), len(over), strings.Join(over, "\n  "))
}
