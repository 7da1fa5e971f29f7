package report

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gymlens/gymlens/contract"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// goldenOptions are the options the golden report is rendered with.
var goldenOptions = TextOptions{SlowestK: 3, Width: 100}

func render(t *testing.T, run Run, opts TextOptions) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteText(&buf, run, opts); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	return buf.String()
}

func TestGoldenText(t *testing.T) {
	run, err := Load(fixture)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	got := render(t, run, goldenOptions)
	const golden = "testdata/run-small.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			g, w := lineAt(gl, i), lineAt(wl, i)
			if g != w {
				t.Fatalf("report differs from %s at line %d:\n got: %q\nwant: %q\n(run with -update if the change is intended)", golden, i+1, g, w)
			}
		}
	}
}

func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<missing>"
}

func TestTextIsDeterministic(t *testing.T) {
	a, err := Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	if render(t, a, goldenOptions) != render(t, b, goldenOptions) {
		t.Fatal("two renderings of the same run differ")
	}
}

func TestTextKeepsToWidth(t *testing.T) {
	run, err := Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, width := range []int{MinWidth, 80, 100, 160} {
		out := render(t, run, TextOptions{SlowestK: 2, Width: width})
		for i, line := range strings.Split(out, "\n") {
			// The one-line run summaries are prose and may run long; the
			// tables and drawings must fit.
			if !strings.Contains(line, "|") && !strings.Contains(line, "█") {
				continue
			}
			if n := utf8.RuneCountInString(line); n > width {
				t.Errorf("width %d: line %d has %d columns: %q", width, i+1, n, line)
			}
		}
	}
}

func TestTextSections(t *testing.T) {
	run, err := Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	out := render(t, run, TextOptions{})
	for _, want := range []string{
		"Run run-small", "Processes seen: 4", "Rollout duration", "percentiles from " + contract.SpanRollout + " spans, exact",
		"Verify duration", "Verify success", "fleet over time", "HTTP server requests",
		"Active servers", "Problems\n  none found",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(out, "Slowest rollouts") {
		t.Error("SlowestK 0 should leave the waterfalls out")
	}
	out = render(t, run, TextOptions{SlowestK: 100})
	if !strings.Contains(out, "Slowest rollouts: 12") {
		t.Error("SlowestK above the number of rollouts should show them all")
	}
}

func TestWaterfallMarksFailures(t *testing.T) {
	run, err := Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	out := render(t, run, TextOptions{SlowestK: 12})
	if n := strings.Count(out, "  FAILED\n"); n != 3 {
		t.Errorf("%d rollouts marked FAILED, want 3", n)
	}
	// The failed verifications' spans carry an error status.
	if !strings.Contains(out, "gym.verify !") || !strings.Contains(out, "POST /verify [server] !") {
		t.Errorf("error spans are not marked:\n%s", out)
	}
}
