package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reportFixture is the committed run directory of the report package.
const reportFixture = "../../report/testdata/run-small"

func TestReportPrintsTheRun(t *testing.T) {
	code, out, errOut := runGym(t, "report", reportFixture)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"Run run-small", "Verify success", "HTTP server requests",
		"Slowest rollouts: 3", "Problems\n  none found"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestReportFlagsBeforeOrAfterTheDirectory(t *testing.T) {
	for _, args := range [][]string{
		{"report", "--slowest", "1", "--width", "80", reportFixture},
		{"report", reportFixture, "--slowest", "1", "--width", "80"},
		{"report", "--slowest=1", reportFixture, "--width=80"},
	} {
		code, out, errOut := runGym(t, args...)
		if code != 0 || !strings.Contains(out, "Slowest rollouts: 1") || strings.Contains(out, "#2") {
			t.Errorf("gymlens %v: exit %d, stderr %q, output:\n%s", args, code, errOut, out)
		}
	}
	code, out, _ := runGym(t, "report", "--slowest", "0", reportFixture)
	if code != 0 || strings.Contains(out, "Slowest rollouts") {
		t.Errorf("--slowest 0: exit %d, output:\n%s", code, out)
	}
}

func TestReportBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"report"},
		{"report", reportFixture, reportFixture},
		{"report", "--slowest", "-1", reportFixture},
		{"report", "--width", "10", reportFixture},
		{"report", "--width", "wide", reportFixture},
		{"report", "--bogus", reportFixture},
		{"report", "--quiet", reportFixture},
		{"report", reportFixture, "--html"},
	} {
		code, out, errOut := runGym(t, args...)
		if code != exitUsage {
			t.Errorf("gymlens %v: exit %d, want %d", args, code, exitUsage)
		}
		if out != "" || errOut == "" {
			t.Errorf("gymlens %v: want the error on stderr only; stdout %q stderr %q", args, out, errOut)
		}
	}
}

func TestReportUnreadableRun(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	code, out, errOut := runGym(t, "report", missing)
	if code != 1 || out != "" || !strings.Contains(errOut, missing) || !strings.Contains(errOut, "does not exist") {
		t.Errorf("missing dir: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// A corrupt line in the middle of a telemetry file: the report goes
	// on, with a note naming the file and the line.
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.CopyFS(dir, os.DirFS(reportFixture)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "telemetry", "orchestrator.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	lines[2] = "{oops"
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runGym(t, "report", dir)
	if code != 0 || !strings.Contains(out, "telemetry/orchestrator.jsonl:3: corrupt line") {
		t.Errorf("corrupt line: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestReportHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "report"}, {"report", "-h"}} {
		code, out, _ := runGym(t, args...)
		if code != 0 || !strings.Contains(out, "Usage: gymlens report RUN_DIR") || !strings.Contains(out, "-slowest") ||
			!strings.Contains(out, "-html FILE") || !strings.Contains(out, "-quiet") {
			t.Errorf("gymlens %v: exit %d, output:\n%s", args, code, out)
		}
	}
	_, out, _ := runGym(t, "help")
	if !strings.Contains(out, "report") {
		t.Errorf("gymlens help does not list report:\n%s", out)
	}
}

func TestReportHTML(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")

	// The page is written and the text report still printed.
	code, out, errOut := runGym(t, "report", reportFixture, "--html", page)
	if code != 0 || errOut != "" || !strings.Contains(out, "Run run-small") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(data)
	for _, want := range []string{"<!DOCTYPE html>", "<title>gymlens report: run-small</title>", ">Slowest rollouts</h2>", "<svg"} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(html, `<details class="trace`); n != 3 {
		t.Errorf("%d waterfalls, want the default 3", n)
	}

	// --quiet leaves stdout empty; --slowest reaches the page.
	quietPage := filepath.Join(dir, "quiet.html")
	code, out, errOut = runGym(t, "report", "--html", quietPage, "--quiet", "--slowest", "5", reportFixture)
	if code != 0 || out != "" || errOut != "" {
		t.Errorf("--quiet: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if data, err := os.ReadFile(quietPage); err != nil || strings.Count(string(data), `<details class="trace`) != 5 {
		t.Errorf("--quiet --slowest 5: page not written with 5 waterfalls (%v)", err)
	}

	// --html - puts the page, and only the page, on stdout.
	code, out, _ = runGym(t, "report", reportFixture, "--html", "-")
	if code != 0 || !strings.HasPrefix(out, "<!DOCTYPE html>") || strings.Contains(out, "Processes seen:") {
		t.Errorf("--html -: exit %d, stdout starts %.80q", code, out)
	}
}

func TestReportHTMLUnwritable(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "no", "such", "dir", "report.html")
	code, out, errOut := runGym(t, "report", reportFixture, "--html", bad)
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q; want 1 and nothing printed", code, out)
	}
	if !strings.Contains(errOut, "cannot write the HTML report to "+bad+":") || strings.Count(errOut, bad) != 1 {
		t.Errorf("stderr does not name the file once: %q", errOut)
	}

	// A directory in the way of the file.
	code, _, errOut = runGym(t, "report", reportFixture, "--html", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "cannot write the HTML report") {
		t.Errorf("directory as file: exit %d, stderr %q", code, errOut)
	}
}

func TestReportFromBackendsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"report", "--jaeger", "http://127.0.0.1:1"}, exitUsage, "need --run-id"},
		{[]string{"report", "--run-id", "r1", t.TempDir()}, exitUsage, "go with --jaeger or --prometheus"},
		{[]string{"report", "--prometheus", "localhost:9090", "--run-id", "r1"}, exitUsage, "want http://HOST:PORT"},
		{[]string{"report", "--jaeger", "http://127.0.0.1:1", "--run-id", "r1", "--since", "0s"}, exitUsage, "--since"},
		// Nothing listens on port 1: the backend cannot be read.
		{[]string{"report", "--jaeger", "http://127.0.0.1:1", "--run-id", "r1"}, exitUnreadable, "jaeger http://127.0.0.1:1"},
	} {
		code, _, stderr := runGym(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("gymlens %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}
