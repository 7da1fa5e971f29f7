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
	if l.Lost() == 0 {
		return fmt.Sprintf("telemetry lost no spans (%d accounted for)", l.Spans)
	}
	var causes []string
	for _, c := range []struct {
		n    uint64
		what string
	}{{l.QueueFull, "dropped with the export queue full"}, {l.ExportFailed, "in failed exports"}, {l.Unflushed, "still queued at shutdown"}} {
		if c.n > 0 {
			causes = append(causes, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return fmt.Sprintf("telemetry lost %d spans (%s) of %d: %s", l.Lost(), percentText(l.Fraction()), l.Spans, strings.Join(causes, ", "))
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
	byProc := map[*Process]*SpanLoss{}
	var order []*Process
	get := func(p *Process) *SpanLoss {
		l := byProc[p]
		if l == nil {
			l = &SpanLoss{Process: p}
			byProc[p] = l
			order = append(order, p)
		}
		return l
	}
	for _, s := range r.SeriesNamed(contract.SDKSpanProcessed) {
		l, v := get(s.Process), uint64(max(s.Last().Value, 0))
		l.Spans += v
		switch s.Attr(contract.AttrErrorType) {
		case contract.SpanLossQueueFull:
			l.QueueFull += v
		case contract.SpanLossUnflushed:
			l.Unflushed += v
		}
	}
	for _, s := range r.SeriesNamed(contract.SDKSpanExported) {
		if s.Attr(contract.AttrErrorType) != "" {
			get(s.Process).ExportFailed += uint64(max(s.Last().Value, 0))
		}
	}
	out := make([]SpanLoss, 0, len(order))
	for _, p := range r.Processes {
		if l := byProc[p]; l != nil {
			out = append(out, *l)
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
