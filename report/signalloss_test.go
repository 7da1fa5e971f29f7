package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
)

// appendSignalAccount appends a metric and log account, as lens writes it
// at shutdown beside the span account, to a telemetry file of the run
// directory: points delivered and failed, log records delivered, failed,
// dropped with the queue full and unflushed.
func appendSignalAccount(t *testing.T, dir, file string, points, pointsFailed, logs, logsFailed, logsQueueFull, logsUnflushed int64) {
	t.Helper()
	pt := func(v int64, errType string) telfile.Point {
		a := map[string]any{contract.AttrComponentName: "otlp"}
		if errType != "" {
			a[contract.AttrErrorType] = errType
		}
		return telfile.Point{Attributes: a, TimeNS: 1, Value: telfile.IntNumber(v)}
	}
	sum := func(name string, pts ...telfile.Point) *telfile.Metric {
		return &telfile.Metric{Name: name, Kind: telfile.MetricSum, Temporality: telfile.TemporalityCumulative, Monotonic: true, Points: pts}
	}
	var b []byte
	for _, m := range []*telfile.Metric{
		sum(contract.SDKMetricPointExported, pt(points, ""), pt(pointsFailed, contract.SpanLossExportFailed)),
		sum(contract.SDKLogProcessed, pt(logs+logsFailed, ""), pt(logsQueueFull, contract.SpanLossQueueFull), pt(logsUnflushed, contract.SpanLossUnflushed)),
		sum(contract.SDKLogExported, pt(logs, ""), pt(logsFailed, contract.SpanLossExportFailed)),
	} {
		var err error
		if b, err = telfile.AppendLine(b, m); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, "telemetry", file), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func TestMetricAndLogLossesArePrintedPerSignal(t *testing.T) {
	dir := copyFixture(t)
	appendAccount(t, dir, "arithmetic.jsonl", 40, 0, 0, 0)
	appendSignalAccount(t, dir, "arithmetic.jsonl", 0, 120, 2, 5, 3, 1)
	appendAccount(t, dir, "policy_model.jsonl", 10, 0, 0, 0)
	appendSignalAccount(t, dir, "policy_model.jsonl", 80, 0, 4, 0, 0, 0)
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var points, logs SignalLoss
	for _, l := range run.SignalLosses(SignalMetricPoints) {
		if l.Process.Name() == "arithmetic" {
			points = l
		}
	}
	for _, l := range run.SignalLosses(SignalLogRecords) {
		if l.Process.Name() == "arithmetic" {
			logs = l
		}
	}
	if points.Total != 120 || points.Lost() != 120 || points.ExportFailed != 120 {
		t.Errorf("arithmetic's metric account %+v, want 120 of 120 points in failed exports", points)
	}
	if logs.Total != 11 || logs.Lost() != 9 || logs.ExportFailed != 5 || logs.QueueFull != 3 || logs.Unflushed != 1 {
		t.Errorf("arithmetic's log account %+v, want 9 of 11 lost (5 failed, 3 queue full, 1 unflushed)", logs)
	}
	var out strings.Builder
	if err := WriteText(&out, run, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"telemetry lost no spans (2 processes accounted for 50)",
		"arithmetic: telemetry lost 120 metric data points (100%) of 120: 120 in failed exports",
		"arithmetic: telemetry lost 9 log records (82%) of 11: 3 dropped with the export queue full, 5 in failed exports, 1 still queued at shutdown",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "policy_model: telemetry lost") {
		t.Errorf("a process that lost nothing is listed:\n%s", out.String())
	}
}

func TestNoMetricOrLogLossSaysSo(t *testing.T) {
	dir := copyFixture(t)
	appendSignalAccount(t, dir, "arithmetic.jsonl", 30, 0, 5, 0, 0, 0)
	appendSignalAccount(t, dir, "policy_model.jsonl", 12, 0, 2, 0, 0, 0)
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := WriteText(&out, run, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"telemetry lost no metric data points (2 processes accounted for 42)",
		"telemetry lost no log records (2 processes accounted for 7)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
