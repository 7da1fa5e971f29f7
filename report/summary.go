package report

// Summary is the short account `gymlens run` prints after collecting.
type Summary struct {
	// Processes has one entry per telemetry file, sorted by file name.
	Processes []Process
	// Traces is the number of distinct trace ids among exported spans.
	Traces int
	// Spans is the number of exported spans.
	Spans int
	// Rollouts counts the rollouts recorded (Run.Rollouts: completed and
	// failed); Failed the failed ones; Rewarded those with a reward above
	// 0.
	Rollouts, Failed, Rewarded int
	// DurationsMS are the rollout durations the collector measured, in
	// Run.Rollouts order.
	DurationsMS []float64
	// SpanLosses is the span account of every process that wrote one (see
	// Run.SpanLosses).
	SpanLosses []SpanLoss
	// Notes lists recoverable problems met while reading (a truncated last
	// line, say), each naming the file and line.
	Notes []string
}

// SuccessFraction is the fraction of rollouts that were rewarded.
func (s Summary) SuccessFraction() float64 {
	if s.Rollouts == 0 {
		return 0
	}
	return float64(s.Rewarded) / float64(s.Rollouts)
}

// Summarize loads dir (see LoadWith) and condenses it into a Summary. The
// summary draws no trace, so none is kept in full while loading.
func Summarize(dir string) (Summary, error) {
	run, err := LoadWith(dir, LoadOptions{})
	if err != nil {
		return Summary{}, err
	}
	return run.Summary(), nil
}

// Summary condenses the run into the short account.
func (r *Run) Summary() Summary {
	var sum Summary
	for _, p := range r.Processes {
		sum.Processes = append(sum.Processes, *p)
	}
	sum.Traces = r.TraceCount()
	sum.Spans = r.SpanCount()
	sum.Rollouts = len(r.Rollouts)
	sum.Failed, sum.Rewarded, _ = r.rolloutCounts()
	for _, ro := range r.Rollouts {
		sum.DurationsMS = append(sum.DurationsMS, ro.DurationMS)
	}
	sum.SpanLosses = r.SpanLosses()
	for _, n := range r.Notes {
		sum.Notes = append(sum.Notes, n.String())
	}
	return sum
}
