package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
)

// appendAccount appends a span account, as lens writes it at shutdown, to
// a telemetry file of the run directory.
func appendAccount(t *testing.T, dir, file string, delivered, failed, queueFull, unflushed int64) {
	t.Helper()
	pt := func(v int64, errType string) telfile.Point {
		a := map[string]any{contract.AttrComponentName: "otlp"}
		if errType != "" {
			a[contract.AttrErrorType] = errType
		}
		return telfile.Point{Attributes: a, TimeNS: 1, Value: telfile.IntNumber(v)}
	}
	var b []byte
	for _, m := range []*telfile.Metric{
		{Name: contract.SDKSpanProcessed, Kind: telfile.MetricSum, Temporality: telfile.TemporalityCumulative, Monotonic: true,
			Points: []telfile.Point{pt(delivered+failed, ""), pt(queueFull, contract.SpanLossQueueFull), pt(unflushed, contract.SpanLossUnflushed)}},
		{Name: contract.SDKSpanExported, Kind: telfile.MetricSum, Temporality: telfile.TemporalityCumulative, Monotonic: true,
			Points: []telfile.Point{pt(delivered, ""), pt(failed, contract.SpanLossExportFailed)}},
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

func TestSpanLossesAreReportedAndChecked(t *testing.T) {
	dir := copyFixture(t)
	appendAccount(t, dir, "arithmetic.jsonl", 900, 60, 30, 10) // 100 of 1000 lost
	appendAccount(t, dir, "policy_model.jsonl", 500, 0, 0, 0)
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	losses := run.SpanLosses()
	if len(losses) != 2 {
		t.Fatalf("SpanLosses = %v, want the two accounts", losses)
	}
	var lossy SpanLoss
	for _, l := range losses {
		if l.Process.Name() == "arithmetic" {
			lossy = l
		}
	}
	if lossy.Spans != 1000 || lossy.Lost() != 100 || lossy.ExportFailed != 60 || lossy.QueueFull != 30 || lossy.Unflushed != 10 {
		t.Fatalf("arithmetic's account %+v, want 100 of 1000 lost (60 failed, 30 queue full, 10 unflushed)", lossy)
	}
	want := "arithmetic: telemetry lost 100 spans (10%) of 1000: 30 dropped with the export queue full, 60 in failed exports, 10 still queued at shutdown"
	var out strings.Builder
	if err := WriteText(&out, run, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, out.String())
	}
	if ps := problemsOf(run, ProblemSpanLoss); len(ps) != 1 || !strings.Contains(ps[0].Message, "telemetry lost 100 spans") {
		t.Errorf("spans lost problems %v, want one for arithmetic", ps)
	}
	sum := run.Summary()
	if err := sum.CheckSpanLoss(0.01); err == nil || !strings.Contains(err.Error(), "arithmetic") || strings.Contains(err.Error(), "policy_model") {
		t.Errorf("CheckSpanLoss(1%%) = %v, want arithmetic named and policy_model not", err)
	}
	if err := sum.CheckSpanLoss(0.10); err != nil {
		t.Errorf("CheckSpanLoss(10%%) = %v, want nil: exactly 10%% is allowed", err)
	}
}

func TestNoSpanLossSaysSo(t *testing.T) {
	dir := copyFixture(t)
	appendAccount(t, dir, "arithmetic.jsonl", 40, 0, 0, 0)
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := WriteText(&out, run, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "telemetry lost no spans (1 processes accounted for 40)"; !strings.Contains(out.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, out.String())
	}
	if err := run.Summary().CheckSpanLoss(0); err != nil {
		t.Errorf("CheckSpanLoss(0) = %v with nothing lost", err)
	}
}

func TestPercentTextNeverRoundsALossToZero(t *testing.T) {
	for f, want := range map[float64]string{0: "0%", 0.5: "50%", 0.012: "1.2%", 0.0001: "0.01%", 1.0 / 3000: "0.033%"} {
		if got := percentText(f); got != want {
			t.Errorf("percentText(%v) = %q, want %q", f, got, want)
		}
	}
}
