package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
)

func renderHTML(t *testing.T, run Run, opts HTMLOptions) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, run, opts); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	return buf.String()
}

// chartIDs are the ids of the SVG charts the fixture's page must hold.
var chartIDs = []string{
	"chart-rollout-duration-buckets", "chart-rollout-duration-spans",
	"chart-verify-duration-buckets", "chart-verify-duration-spans",
	"chart-verify-windows", "chart-servers-active",
}

func TestHTMLSections(t *testing.T) {
	run := loadFixture(t)
	out := renderHTML(t, run, HTMLOptions{SlowestK: 3})
	// The figures the page must agree with, taken from the run itself so
	// they hold for any regeneration of the fixture.
	rollouts := run.SpanDurations(contract.SpanRollout, true)
	verifies := run.SpanDurations(contract.SpanVerify, false)
	if len(rollouts) == 0 || len(verifies) == 0 {
		t.Fatalf("fixture has %d gym.rollout and %d gym.verify spans", len(rollouts), len(verifies))
	}
	if !strings.HasPrefix(out, "<!DOCTYPE html>") || !strings.HasSuffix(strings.TrimSpace(out), "</html>") {
		t.Errorf("not a complete HTML document: starts %q", out[:min(len(out), 40)])
	}
	for _, want := range []string{
		"<title>gymlens report: run-small</title>",
		`<h1><span class="lbl">Run</span>run-small</h1>`,
		">Summary</h2>", ">Processes</h2>", ">Rollout duration</h2>", ">Verify duration</h2>",
		">Verify success</h2>", ">HTTP server requests</h2>", ">Active servers</h2>",
		">Slowest rollouts</h2>", ">Problems</h2>", "None found.",
		// The numbers agree with the text report.
		fmtDuration(run.Duration()) + " from first to last telemetry record", "12 (9 in rollouts.jsonl, 3 in rollouts_failures.jsonl): 3 failed, 7 rewarded",
		">" + fmtDuration(DurationQuantile(rollouts, 0.5)) + "<", ">" + fmtDuration(rollouts[len(rollouts)-1]) + "<",
		">" + fmtDuration(verifies[len(verifies)-1]) + "<", "Fleet over time, 200ms windows",
		"<code>9-0</code>, <code>10-0</code>, <code>11-0</code>", "handler panicked", "/v1/responses",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, id := range chartIDs {
		if !regexp.MustCompile(`<svg id="` + id + `" [^>]*viewBox="0 0 \d+ \d+"`).MatchString(out) {
			t.Errorf("page lacks the SVG chart %s", id)
		}
	}
	for _, tag := range []string{"section", "details", "summary", "svg", "table", "figure", "div", "span"} {
		open := len(regexp.MustCompile(`<`+tag+`[ >]`).FindAllStringIndex(out, -1))
		if closed := strings.Count(out, "</"+tag+">"); open != closed || open == 0 {
			t.Errorf("<%s>: %d opened, %d closed", tag, open, closed)
		}
	}
	if n := strings.Count(out, `<details class="trace`); n != 3 {
		t.Errorf("%d waterfalls, want 3", n)
	}
	if n := strings.Count(out, `<details class="span">`); n != 30 {
		t.Errorf("%d span rows, want 30 (10 spans in each of 3 traces)", n)
	}
	if n := strings.Count(out, `<details class="trace" open>`); n != 1 {
		t.Errorf("%d waterfalls open at first, want 1 (the slowest)", n)
	}
	// A span row reveals its attributes.
	for _, want := range []string{"<td><code>nemo.gym.rollout.id</code></td>", "<td>span id</td>", "gen_ai.usage.input_tokens"} {
		if !strings.Contains(out, want) {
			t.Errorf("span details lack %q", want)
		}
	}
}

func TestHTMLSlowestOption(t *testing.T) {
	run := loadFixture(t)
	out := renderHTML(t, run, HTMLOptions{})
	if strings.Contains(out, "Slowest rollouts") || strings.Contains(out, "<details class=\"trace") {
		t.Error("SlowestK 0 should leave the waterfalls out")
	}
	out = renderHTML(t, run, HTMLOptions{SlowestK: 100})
	if n := strings.Count(out, `<details class="trace`); n != 12 {
		t.Errorf("SlowestK 100: %d waterfalls, want all 12", n)
	}
	if n := strings.Count(out, `<details class="trace failed"`); n != 3 {
		t.Errorf("%d waterfalls marked failed, want 3", n)
	}
	// The failed verifications' spans carry an error status, shown in red.
	if n := strings.Count(out, `<span class="badge bad">error</span>`); n < 3 {
		t.Errorf("%d spans marked as errors, want at least 3", n)
	}
}

func TestHTMLIsDeterministic(t *testing.T) {
	a := renderHTML(t, loadFixture(t), HTMLOptions{SlowestK: 5})
	b := renderHTML(t, loadFixture(t), HTMLOptions{SlowestK: 5})
	if a != b {
		t.Fatal("two renderings of the same run differ")
	}
}

// TestHTMLIsSelfContained checks that the page refers to nothing outside
// itself: no scripts, style sheets, fonts, images or frames, and no URL
// anywhere but in text the run itself holds.
func TestHTMLIsSelfContained(t *testing.T) {
	out := renderHTML(t, loadFixture(t), HTMLOptions{SlowestK: 12})
	lower := strings.ToLower(out)
	for _, bad := range []string{"<script src", "<link", "@import", "url(", "@font-face", "<img", "<iframe",
		"<object", "<embed", "<base", "<audio", "<video", "xlink:href", "srcset"} {
		if strings.Contains(lower, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	for _, m := range regexp.MustCompile(`\s(src|href|action|formaction|poster|data)\s*=\s*"([^"]*)"`).FindAllStringSubmatch(out, -1) {
		if !strings.HasPrefix(m[2], "#") {
			t.Errorf("attribute %s=%q points outside the page", m[1], m[2])
		}
	}
	if n := strings.Count(lower, "<script"); n != 1 {
		t.Errorf("%d script elements, want just the page's own", n)
	}
	// http:// and https:// may appear only in text content (the fixture's
	// error messages and url.full attributes name the local servers), never
	// inside a tag, a style sheet or a script.
	for _, scheme := range []string{"http://", "https://"} {
		for i := 0; ; {
			j := strings.Index(lower[i:], scheme)
			if j < 0 {
				break
			}
			at := i + j
			if strings.LastIndex(lower[:at], "<") > strings.LastIndex(lower[:at], ">") {
				t.Errorf("%s inside a tag: %q", scheme, out[max(0, at-60):min(len(out), at+40)])
			}
			i = at + len(scheme)
		}
	}
	for _, block := range regexp.MustCompile(`(?s)<(style|script)>(.*?)</(style|script)>`).FindAllStringSubmatch(out, -1) {
		if strings.Contains(block[2], "http") {
			t.Errorf("<%s> refers to something outside the page", block[1])
		}
	}
	csp := regexp.MustCompile(`<meta http-equiv="Content-Security-Policy" content="([^"]*)">`).FindStringSubmatch(out)
	if csp == nil || !strings.Contains(csp[1], "default-src 'none'") || !strings.Contains(csp[1], "script-src 'sha256-") {
		t.Errorf("page lacks a Content-Security-Policy that forbids loading: %v", csp)
	}
}

// hostileNames are strings planted in a copy of the fixture by
// hostileRun; none may reach the page as markup.
var hostileNames = []string{
	`<script>alert(1)</script>`,
	`</td><script>console.error("attr value ran")</script>`,
	`<b onmouseover=alert(4)>mode`,
	`nemo-gym/<img src=x onerror=console.error("service")>`,
	`<script>console.error("rollout error ran")</script>`,
}

// hostileRun copies the fixture and plants hostileNames in it: a span
// name, an attribute value and key, a service name, and a rollout's error.
func hostileRun(t *testing.T) Run {
	t.Helper()
	dir := copyFixture(t)
	editFile(t, dir, "telemetry/policy_model.jsonl", func(s string) string {
		s = strings.ReplaceAll(s, `"name":"gym.model.responses"`, `"name":"<script>alert(1)</script>"`)
		s = strings.ReplaceAll(s, `"gen_ai.request.model":"gym-policy"`, `"gen_ai.request.model":"</td><script>console.error(\"attr value ran\")</script>"`)
		s = strings.ReplaceAll(s, `"nemo.gym.model.mode"`, `"<b onmouseover=alert(4)>mode"`)
		return strings.Replace(s, `"service.name":"nemo-gym/policy_model"`, `"service.name":"nemo-gym/<img src=x onerror=console.error(\"service\")>"`, 1)
	})
	editFile(t, dir, contract.RunFailuresFile, func(s string) string {
		return strings.Replace(s, `"_ng_failure_error":"`, `"_ng_failure_error":"<script>console.error(\"rollout error ran\")</script>`, 1)
	})
	run, err := Load(dir)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return run
}

func TestHTMLEscapesTelemetry(t *testing.T) {
	run := hostileRun(t)
	out := renderHTML(t, run, HTMLOptions{SlowestK: 3})
	for _, want := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;",                                   // span name
		"&lt;/td&gt;&lt;script&gt;console.error(&#34;attr value ran&#34;)",        // attribute value
		"&lt;b onmouseover=alert(4)&gt;mode",                                      // attribute key
		"nemo-gym/&lt;img src=x onerror=console.error(&#34;service&#34;)&gt;",     // service name
		"&lt;script&gt;console.error(&#34;rollout error ran&#34;)&lt;/script&gt;", // rollout error
	} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks the escaped form %q", want)
		}
	}
	for _, name := range hostileNames {
		if strings.Contains(out, name) {
			t.Errorf("page holds %q unescaped", name)
		}
	}
	lower := strings.ToLower(out)
	if n := strings.Count(lower, "<script"); n != 1 {
		t.Errorf("%d script elements, want just the page's own", n)
	}
	for _, tag := range []string{"<img", "<b ", "</td><script"} {
		if strings.Contains(lower, tag) {
			t.Errorf("page holds %q", tag)
		}
	}
}

func TestHTMLSparseRuns(t *testing.T) {
	// Nothing at all: every section says so rather than failing.
	out := renderHTML(t, Run{ID: "empty", Dir: "runs/empty"}, HTMLOptions{SlowestK: 3})
	for _, want := range []string{"Run</span>empty", "No telemetry files.",
		"Histogram <code>" + contract.RolloutDuration + "</code> not exported.", "No <code>" + contract.SpanVerify + "</code> spans exported.",
		"Not exported.", "No " + contract.SpanRollout + " spans exported.", "None found.", "Telemetry</dt><dd>none exported"} {
		if !strings.Contains(out, want) {
			t.Errorf("empty run: page lacks %q", want)
		}
	}
	if strings.Contains(out, "<svg") {
		t.Error("empty run: page draws a chart of nothing")
	}

	// A damaged fixture: a broken trace and a note show up.
	dir := copyFixture(t)
	editFile(t, dir, "telemetry/arithmetic.jsonl", func(s string) string {
		lines := strings.Split(s, "\n")
		return strings.Join(lines[:len(lines)-2], "\n") + "\n" + `{"type":"span","trace_id":"ab`
	})
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out = renderHTML(t, run, HTMLOptions{SlowestK: 1})
	if !strings.Contains(out, ">Notes</h2>") || !strings.Contains(out, "last line is cut short") {
		t.Error("page lacks the note about the cut-short line")
	}
}

func TestHTMLWriteError(t *testing.T) {
	want := errors.New("disk full")
	if err := WriteHTML(failingWriter{want}, loadFixture(t), HTMLOptions{}); !errors.Is(err, want) {
		t.Errorf("WriteHTML = %v, want %v", err, want)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestNiceAxis(t *testing.T) {
	for _, c := range []struct {
		peak  float64
		whole bool
		top   float64
		ticks int
	}{
		{12, true, 15, 4}, {4, true, 4, 5}, {0, true, 1, 2}, {740, false, 800, 5}, {0.3, false, 0.3, 4},
	} {
		top, ticks := niceAxis(c.peak, 4, c.whole)
		if top != c.top || len(ticks) != c.ticks || ticks[0] != 0 || ticks[len(ticks)-1] < c.peak {
			t.Errorf("niceAxis(%v): top %v ticks %v, want top %v with %d ticks", c.peak, top, ticks, c.top, c.ticks)
		}
	}
	lo, hi, ticks := niceRange(121.2, 122.7, 6)
	if lo > 121.2 || hi < 122.7 || hi-lo > 3 || len(ticks) < 3 {
		t.Errorf("niceRange(121.2, 122.7) = %v, %v, %v", lo, hi, ticks)
	}
	if lo, _, _ := niceRange(0.01, 0.19, 6); lo != 0 {
		t.Errorf("a range near 0 should start at 0, got %v", lo)
	}
	if lo, hi, _ := niceRange(5, 5, 6); !(lo < 5 && hi > 5) {
		t.Errorf("niceRange(5, 5) = %v, %v", lo, hi)
	}
	for ms, want := range map[float64]string{0: "0", 0.30000000000000004: "0.3ms", 250: "250ms", 1500: "1.5s", 90_000: "1m30s"} {
		if got := fmtTickMS(ms); got != want {
			t.Errorf("fmtTickMS(%v) = %q, want %q", ms, got, want)
		}
	}
}

// Headless Chromium checks. They need the Debian chromium package; when it
// is missing and the test runs as root with apt-get, the test installs it.

const (
	chromiumRunTimeout     = 60 * time.Second
	chromiumInstallTimeout = 5 * time.Minute
	shotWidth, shotHeight  = 1280, 2000
)

var chromium struct {
	once sync.Once
	path string
	why  string // why there is none
}

// findChromium returns the Chromium binary, installing the Debian package
// first if need be and possible; it skips the test when there is none.
func findChromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("headless Chromium test skipped in -short mode")
	}
	chromium.once.Do(func() {
		if p := lookChromium(); p != "" {
			chromium.path = p
			return
		}
		if os.Geteuid() != 0 {
			chromium.why = "chromium is not installed and the test is not running as root to install it (apt-get install chromium)"
			return
		}
		if _, err := exec.LookPath("apt-get"); err != nil {
			chromium.why = "chromium is not installed and there is no apt-get to install it"
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), chromiumInstallTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c", "apt-get update -qq && apt-get install -y -qq chromium")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := runGroup(cmd)
		if p := lookChromium(); err == nil && p != "" {
			chromium.path = p
			return
		}
		tail := strings.TrimSpace(string(out))
		if len(tail) > 2000 {
			tail = "..." + tail[len(tail)-2000:]
		}
		chromium.why = fmt.Sprintf("installing chromium with apt-get failed (%v):\n%s", err, tail)
	})
	if chromium.path == "" {
		if os.Getenv("CI") != "" {
			// CI must not go green without the browser check.
			t.Fatalf("headless Chromium unavailable in CI: %s", chromium.why)
		}
		t.Skip(chromium.why)
	}
	return chromium.path
}

func lookChromium() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if fi, err := os.Stat("/usr/bin/chromium"); err == nil && !fi.IsDir() {
		return "/usr/bin/chromium"
	}
	return ""
}

// runGroup runs cmd in a process group of its own and returns its
// combined output. When cmd's context ends the whole group is killed, and
// so is whatever cmd left behind in it when it exits (Chromium's helper
// processes).
func runGroup(cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &out
	}
	cmd.Stderr = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pgid := cmd.Process.Pid
	err := cmd.Wait()
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // leftovers; ESRCH when none
	return out.Bytes(), err
}

// runChromium runs headless Chromium on the file page with the given extra
// flags and returns its stdout and stderr.
func runChromium(t *testing.T, bin, page string, extra ...string) (stdout, stderr []byte) {
	t.Helper()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--hide-scrollbars", "--user-data-dir=" + t.TempDir(),
		fmt.Sprintf("--window-size=%d,%d", shotWidth, shotHeight)}
	args = append(append(args, extra...), "file://"+page)
	ctx, cancel := context.WithTimeout(context.Background(), chromiumRunTimeout)
	defer cancel()
	var so bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout = &so
	se, err := runGroup(cmd)
	if ctx.Err() != nil {
		t.Fatalf("chromium did not finish within %v; killed. stderr:\n%s", chromiumRunTimeout, se)
	}
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", extra, err, se)
	}
	return so.Bytes(), se
}

// consoleLine matches a message of the page's console as Chromium logs it
// with --enable-logging=stderr: every level (log, error, an uncaught
// exception, a Content-Security-Policy refusal) comes out as
//
//	[pid:tid:time:INFO:CONSOLE:12] "Uncaught ReferenceError: f is not defined", source: file:///x.html (12)
//
// and older releases write CONSOLE(12) instead of CONSOLE:12.
var consoleLine = regexp.MustCompile(`:CONSOLE[:(]\d*\)?\] "(.*)", source: (.*)$`)

// consoleMessages returns the page's console messages in Chromium's log.
// The report's page logs nothing, so any message at all is a fault: an
// uncaught error, a refused load or script, or a console call.
func consoleMessages(stderr []byte) []string {
	var out []string
	for _, line := range strings.Split(string(stderr), "\n") {
		if m := consoleLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			out = append(out, m[1]+" (at "+m[2]+")")
		}
	}
	return out
}

// brokenPage has every kind of script fault the console check must see.
const brokenPage = `<!DOCTYPE html><html><head><meta charset="utf-8"><title>broken</title></head><body><p>broken</p>
<script>console.error("deliberate console.error");</script>
<script>notDefinedAnywhere();</script>
<script>throw new Error("thrown on purpose");</script>
<script>let x = ;</script>
</body></html>
`

func writePage(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHTMLInChromium(t *testing.T) {
	bin := findChromium(t)
	dir := t.TempDir()

	// The console check must see faults before its silence means anything.
	t.Run("detector sees a broken page", func(t *testing.T) {
		page := writePage(t, dir, "broken.html", brokenPage)
		_, stderr := runChromium(t, bin, page, "--enable-logging=stderr", "--v=0", "--dump-dom")
		msgs := strings.Join(consoleMessages(stderr), "\n")
		for _, want := range []string{"deliberate console.error", "Uncaught ReferenceError: notDefinedAnywhere",
			"Uncaught Error: thrown on purpose", "Uncaught SyntaxError"} {
			if !strings.Contains(msgs, want) {
				t.Errorf("console check missed %q; it found:\n%s\nChromium's stderr:\n%s", want, msgs, stderr)
			}
		}
	})
	if t.Failed() {
		return
	}

	var page bytes.Buffer
	if err := WriteHTML(&page, loadFixture(t), HTMLOptions{SlowestK: DefaultSlowestK}); err != nil {
		t.Fatal(err)
	}
	report := writePage(t, dir, "report.html", page.String())

	t.Run("no script errors", func(t *testing.T) {
		dom, stderr := runChromium(t, bin, report, "--enable-logging=stderr", "--v=0", "--dump-dom")
		if msgs := consoleMessages(stderr); len(msgs) > 0 {
			t.Errorf("the page wrote to the console:\n%s", strings.Join(msgs, "\n"))
		}
		// The script ran: it shows the open/close-all buttons.
		tools := regexp.MustCompile(`<div class="tools" id="wf-tools"[^>]*>`).FindString(string(dom))
		if tools == "" || strings.Contains(tools, "hidden") {
			t.Errorf("the page's script did not run (buttons still hidden: %q)", tools)
		}
		if !strings.Contains(string(dom), "chart-servers-active") {
			t.Errorf("dumped DOM lacks the charts:\n%.2000s", dom)
		}
	})

	t.Run("screenshot", func(t *testing.T) {
		shot := filepath.Join(dir, "shot.png")
		runChromium(t, bin, report, "--screenshot="+shot)
		checkScreenshot(t, shot)
		if keep := os.Getenv("GYMLENS_REPORT_SCREENSHOT"); keep != "" {
			data, err := os.ReadFile(shot)
			if err == nil {
				err = os.WriteFile(keep, data, 0o644)
			}
			if err != nil {
				t.Errorf("keeping the screenshot: %v", err)
			}
		}
	})

	t.Run("hostile names stay text", func(t *testing.T) {
		var hostile bytes.Buffer
		if err := WriteHTML(&hostile, hostileRun(t), HTMLOptions{SlowestK: DefaultSlowestK}); err != nil {
			t.Fatal(err)
		}
		path := writePage(t, dir, "hostile.html", hostile.String())
		dom, stderr := runChromium(t, bin, path, "--enable-logging=stderr", "--v=0", "--dump-dom")
		if msgs := consoleMessages(stderr); len(msgs) > 0 {
			t.Errorf("planted markup ran or was refused:\n%s", strings.Join(msgs, "\n"))
		}
		lower := strings.ToLower(string(dom))
		if strings.Contains(lower, "<img") || strings.Count(lower, "<script") != 1 {
			t.Error("planted markup became elements of the page")
		}
		if !strings.Contains(string(dom), "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Error("the planted span name is not on the page as text")
		}
	})
}

func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot is not a PNG (starts %q)", data[:min(8, len(data))])
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != shotWidth {
		t.Errorf("screenshot is %dx%d, want width %d", b.Dx(), b.Dy(), shotWidth)
	}
	if n := distinctColours(img, 64); n <= 2 {
		t.Errorf("screenshot has %d distinct colours: the page looks blank", n)
	}
}

// distinctColours counts the distinct colours of img, stopping at limit.
func distinctColours(img image.Image, limit int) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}
