// Package report reads a run directory back and reports on it.
//
// A run directory (runs/<run id>/) holds config.yaml, the collector's
// rollouts.jsonl and rollouts_failures.jsonl (completed and failed
// rollouts, one NeMo Gym result line each, with the collector's _gymlens
// member), and one telemetry/<process>.jsonl file per process. [Load]
// reads all of it into a [Run]: the processes, the spans, every metric
// stream followed across exports, and the rollouts. A rollout is known by
// its task and rollout indexes; a reward above 0 counts as rewarded. Spans are many (several per rollout,
// about a kilobyte each once decoded), so a Run holds most of them as
// numbers only: counts, and every span's duration for exact percentiles.
// Only the traces a report draws are kept with every span and attribute:
// the slowest rollouts' (as many as [LoadOptions] ask for) and the spans
// they link to, such as the collection's gym.job span. To get there Load
// reads the telemetry twice, decoding the kept traces' lines a second
// time; the Run it returns takes some 35 bytes per span (durations and
// rollouts) instead of a kilobyte. The Run's methods derive the views a
// report shows (duration distributions, verify success per process and
// over time, HTTP latency per route, the slowest rollouts' traces, the
// spans each process's telemetry lost by its own account written at
// shutdown ([Run.SpanLosses]), problems such as broken traces), and
// [WriteText] renders them as text.
// The model carries no presentation, so other renderers can be built on
// the same methods.
//
//	run dir ──Load──► Run (processes, traces, series, rollouts, notes)
//	                   │  Problems, VerifyWindows, SlowestRollouts, ...
//	                   └──► WriteText (or another renderer)
//
// The report works only from what was exported and written; it never
// re-times anything. Metric records are cumulative and repeat at every
// export, so totals come from a stream's last record and "over time" views
// from the sequence of records. Duration percentiles ([Run.Distribution])
// come from the spans first, exact; only when no span of the name was
// exported (sampled away, or sent to a collector) are they estimated from
// the histogram, whose bucket boundaries are read from the records (the
// SDK's default 0 .. 10000 ms for the gym.* histograms): the rank is
// located in a bucket and interpolated linearly inside it, the outer
// buckets being closed by the recorded min and max, and the report names
// the bucket each estimate lies in.
//
// Damage is handled in two ways. A truncated last line of a telemetry file
// (a writer that died mid-line), a corrupt line in the middle of one (a
// writer that kept appending after a short write, on a full disk), or an
// unreadable line of the rollout files becomes a [Note] and the report
// goes on without that line; a file from another format version makes
// Load fail with a [FileError] naming the file and line.
package report
