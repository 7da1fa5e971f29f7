package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/live"
)

var topCommand = command{
	name:    "top",
	summary: "watch a run while it runs: the fleet, its agents and its slowest and stalled rollouts",
	run:     runTop,
}

// defaultTopInterval is how often gymlens top asks for a new snapshot.
const defaultTopInterval = time.Second

// runTop is `gymlens top --head URL`.
func runTop(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gymlens top", flag.ContinueOnError)
	head := fs.String("head", "", "base URL of the run's status API, http://HOST:PORT: the fleet's head server, or the status listener of gymlens rollouts collect (required)")
	tokenFile := fs.String("head-token-file", "", "file holding the fleet's head token (the run directory's "+contract.RunHeadTokenFile+"); default: $"+contract.EnvHeadToken)
	once := fs.Bool("once", false, "print one snapshot and exit")
	asJSON := fs.Bool("json", false, "print snapshots as the status API's JSON, one a line")
	state := fs.String("state", "", "list only the rollouts in this state (queued, active, slow, retrying, stalled, failed, cancelled, done)")
	limit := fs.Int("limit", 0, "list at most this many rollouts (0: the status API's default)")
	interval := fs.Duration("interval", defaultTopInterval, "time between snapshots")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gymlens top --head http://HOST:PORT [flags]\n\n"+
			"Shows a run while it runs, from its status API (%s): the run's\n"+
			"rollouts by state and its rate and success over the last minute, a row\n"+
			"per agent, the stages its agents report, and the rollouts in flight,\n"+
			"stalled and slow first. On a terminal it redraws in place: up/down (or\n"+
			"k/j) select a rollout, enter shows its steps and trace id, f cycles the\n"+
			"state shown, q quits. Elsewhere (a pipe, a log) it prints a plain frame\n"+
			"every interval; --once prints one; --json prints the API's JSON.\n\nFlags:\n", live.StatusPath)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	base, err := headBase(*head)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens top: --head: %v\n", err)
		return exitUsage
	}
	if *interval <= 0 {
		fmt.Fprintf(stderr, "gymlens top: --interval %s: want a duration above 0\n", *interval)
		return exitUsage
	}
	filter := live.Filter{State: live.State(*state), Limit: *limit}
	if err := filter.Validate(); err != nil {
		fmt.Fprintf(stderr, "gymlens top: --state: %v\n", err)
		return exitUsage
	}
	if *limit < 0 {
		fmt.Fprintf(stderr, "gymlens top: --limit %d: want 0 or more\n", *limit)
		return exitUsage
	}
	token, err := headToken(*tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens top: %v\n", err)
		return exitUsage
	}
	client := &live.Client{Base: base, Token: token}
	switch {
	case *asJSON:
		return topJSON(ctx, client, filter, *once, *interval, stdout, stderr)
	case !*once && isTerminal(stdout) && term.IsTerminal(int(os.Stdin.Fd())):
		return topTerminal(ctx, client, filter, *interval, stdout, stderr)
	}
	return topPlain(ctx, client, filter, *once, *interval, stdout, stderr)
}

// topError says why a snapshot could not be had, and whether to give up:
// a refusal of the token or of the request will not change.
func topError(stderr io.Writer, err error) (fatal bool) {
	var se *live.StatusError
	if errors.As(err, &se) && (se.Status == 401 || se.Status == 400 || se.Status == 404) {
		if se.Status == 401 {
			fmt.Fprintf(stderr, "gymlens top: the server wants the fleet's head token (--head-token-file, or $%s): %v\n", contract.EnvHeadToken, err)
		} else {
			fmt.Fprintf(stderr, "gymlens top: %v\n", err)
		}
		return true
	}
	fmt.Fprintf(stderr, "gymlens top: %v\n", err)
	return false
}

// gone reports (and says) that the status API that answered before
// refuses connections now: the run ended and its head server with it.
func gone(seen bool, err error, stderr io.Writer) bool {
	if !seen || !errors.Is(err, syscall.ECONNREFUSED) {
		return false
	}
	fmt.Fprintln(stderr, "gymlens top: the status API is gone: the run has ended")
	return true
}

// every calls fn now and then every interval until ctx ends or fn says
// stop.
func every(ctx context.Context, interval time.Duration, fn func() bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for fn() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// topPoll fetches the snapshot every interval (once with once) and hands
// its JSON to show, which says whether to go on. It ends with exit status
// 1 on a refusal that will not change or, with once, any failure; 0 when
// show stops it, ctx ends, or the status API that answered before is gone.
func topPoll(ctx context.Context, c *live.Client, f live.Filter, once bool, interval time.Duration, stderr io.Writer, show func(raw []byte) bool) int {
	code := exitOK
	seen := false
	every(ctx, interval, func() bool {
		raw, err := c.Raw(ctx, f)
		if err != nil {
			if ctx.Err() != nil || gone(seen, err, stderr) {
				return false
			}
			if fatal := topError(stderr, err); once || fatal {
				code = 1
				return false
			}
			return true
		}
		seen = true
		return show(raw) && !once
	})
	return code
}

func topJSON(ctx context.Context, c *live.Client, f live.Filter, once bool, interval time.Duration, stdout, stderr io.Writer) int {
	return topPoll(ctx, c, f, once, interval, stderr, func(raw []byte) bool {
		fmt.Fprintf(stdout, "%s\n", raw)
		return true
	})
}

func topPlain(ctx context.Context, c *live.Client, f live.Filter, once bool, interval time.Duration, stdout, stderr io.Writer) int {
	return topPoll(ctx, c, f, once, interval, stderr, func(raw []byte) bool {
		var snap live.Snapshot
		if err := json.Unmarshal(raw, &snap); err != nil {
			fmt.Fprintf(stderr, "gymlens top: %v\n", err)
			return false
		}
		for _, l := range topFrame(snap, topView{filter: f, selected: -1}, 0) {
			fmt.Fprintln(stdout, l)
		}
		if !once {
			fmt.Fprintln(stdout)
		}
		return !snap.Ended
	})
}

// topView is what the terminal view shows besides the snapshot: the
// state filter, the selected rollout, and whether its detail is open.
type topView struct {
	filter   live.Filter
	selected int // index into the snapshot's rollouts; -1 for none
	detail   bool
	note     string // the last fetch error, shown in the frame
}

// topFilters are the state filters f cycles through ("" shows the
// rollouts in flight).
var topFilters = []live.State{"", live.Stalled, live.Slow, live.Retrying, live.Failed, live.Done}

// topTerminal is the interactive view: the frame redrawn in place on the
// alternate screen, keys read from the terminal in raw mode.
func topTerminal(ctx context.Context, c *live.Client, f live.Filter, interval time.Duration, stdout, stderr io.Writer) int {
	fd := int(os.Stdin.Fd())
	old, err := term.MakeRaw(fd)
	if err != nil {
		return topPlain(ctx, c, f, false, interval, stdout, stderr)
	}
	defer term.Restore(fd, old)
	fmt.Fprint(stdout, "\x1b[?1049h\x1b[?25l") // alternate screen, no cursor
	defer fmt.Fprint(stdout, "\x1b[?25h\x1b[?1049l")

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	keys := make(chan string)
	go readKeys(ctx, os.Stdin, keys)

	view := topView{filter: f, selected: 0}
	var snap live.Snapshot
	var detail *live.Rollout
	fetch := func() {
		s, err := c.Snapshot(ctx, view.filter)
		if err != nil {
			view.note = err.Error()
			return
		}
		snap, view.note = s, ""
		view.selected = min(view.selected, len(snap.Rollouts)-1)
		detail = nil
		if view.detail && view.selected >= 0 {
			// The selected rollout afresh, wherever the list has put it.
			id := snap.Rollouts[view.selected].RolloutID
			if one, err := c.Snapshot(ctx, live.Filter{RolloutID: id}); err == nil && len(one.Rollouts) == 1 {
				detail = &one.Rollouts[0]
			}
		}
	}
	draw := func() {
		_, height, err := term.GetSize(fd)
		if err != nil {
			height = 0
		}
		lines := topFrame(snap, view, height)
		if detail != nil {
			lines = append(lines, "")
			lines = append(lines, rolloutDetail(*detail)...)
		}
		var b strings.Builder
		b.WriteString("\x1b[H")
		for i, l := range lines {
			if height > 0 && i >= height {
				break
			}
			b.WriteString(l)
			b.WriteString("\x1b[K\r\n")
		}
		b.WriteString("\x1b[J")
		fmt.Fprint(stdout, b.String())
	}
	fetch()
	draw()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-t.C:
			fetch()
		case k, ok := <-keys:
			if !ok {
				return exitOK
			}
			switch k {
			case "q", "ctrl-c":
				return exitOK
			case "up":
				view.selected = max(view.selected-1, 0)
			case "down":
				view.selected = min(view.selected+1, max(len(snap.Rollouts)-1, 0))
			case "enter":
				view.detail = !view.detail
				fetch()
			case "f":
				i := 0
				for j, s := range topFilters {
					if s == view.filter.State {
						i = j
					}
				}
				view.filter.State = topFilters[(i+1)%len(topFilters)]
				view.selected, view.detail = 0, false
				fetch()
			}
		}
		draw()
	}
}

// readKeys turns the terminal's bytes into key names until ctx ends or
// the input does.
func readKeys(ctx context.Context, r io.Reader, keys chan<- string) {
	defer close(keys)
	br := bufio.NewReader(r)
	send := func(k string) bool {
		select {
		case keys <- k:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		b, err := br.ReadByte()
		if err != nil {
			return
		}
		var k string
		switch b {
		case 3:
			k = "ctrl-c"
		case '\r', '\n':
			k = "enter"
		case 'k':
			k = "up"
		case 'j':
			k = "down"
		case 0x1b:
			// An arrow key: ESC [ A (up) or ESC [ B (down).
			if next, _ := br.Peek(2); len(next) == 2 && next[0] == '[' {
				_, _ = br.Discard(2)
				switch next[1] {
				case 'A':
					k = "up"
				case 'B':
					k = "down"
				}
			}
		default:
			k = string(rune(b))
		}
		if k != "" && !send(k) {
			return
		}
	}
}

// topFrame renders a snapshot as the lines of one frame, at most height
// of them when height is positive.
func topFrame(s live.Snapshot, v topView, height int) []string {
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	state := "running"
	if s.Ended {
		state = "ended"
	}
	finished := s.Counts.Done + s.Counts.Failed + s.Counts.Cancelled
	add("gymlens top  run %s  %s  elapsed %s  %s", orDash(s.RunID), state, fmtMS(s.ElapsedMS), s.Time.Format("15:04:05"))
	add("rollouts %d/%d  done %d  failed %d  cancelled %d  |  active %d  slow %d  retrying %d  stalled %d  |  queued %d  |  %.1f/s  success %s (last minute)",
		finished+s.Skipped, s.Total, s.Counts.Done, s.Counts.Failed, s.Counts.Cancelled,
		s.Counts.Active, s.Counts.Slow, s.Counts.Retrying, s.Counts.Stalled, s.Counts.Queued, s.RatePerSecond, pct(s.SuccessRate))
	if v.note != "" {
		add("(last refresh failed: %s)", v.note)
	}
	add("")
	var tb strings.Builder
	tw := tabwriter.NewWriter(&tb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tIN FLIGHT\tQUEUED\tDONE\tFAILED\tSLOW\tSTALLED\tRATE/S\tSUCCESS\tRUN p50\tp95\tp99")
	for _, sv := range s.Servers {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\n", sv.Agent, sv.InFlight, sv.Queued, sv.Done, sv.Failed,
			sv.Slow, sv.Stalled, sv.RatePerSecond, pct(sv.SuccessRate), fmtMS(sv.Run.P50MS), fmtMS(sv.Run.P95MS), fmtMS(sv.Run.P99MS))
	}
	_ = tw.Flush()
	lines = append(lines, strings.Split(strings.TrimRight(tb.String(), "\n"), "\n")...)
	stages := false
	tb.Reset()
	tw = tabwriter.NewWriter(&tb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  STAGE\tAGENT\tSTEPS\tSUCCESS\tp50\tp95\tp99")
	for _, sv := range s.Servers {
		for _, st := range sv.Stages {
			if st.Count == 0 {
				continue
			}
			stages = true
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\n", st.Stage, sv.Agent, st.Count, pct(st.SuccessRate), fmtMS(st.P50MS), fmtMS(st.P95MS), fmtMS(st.P99MS))
		}
	}
	_ = tw.Flush()
	if stages {
		add("")
		lines = append(lines, strings.Split(strings.TrimRight(tb.String(), "\n"), "\n")...)
	}
	add("")
	what := "in flight, stalled and slow first"
	if v.filter.State != "" {
		what = string(v.filter.State)
	}
	add("ROLLOUTS (%s; %d listed, %d more)", what, len(s.Rollouts), s.Truncated)
	tb.Reset()
	tw = tabwriter.NewWriter(&tb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  STATE\tTASK\tREPEAT\tATTEMPT\tROLLOUT ID\tAGENT\tSTAGE\tTURN\tELAPSED\tNO PROGRESS\tSTATUS")
	for i, r := range s.Rollouts {
		mark := " "
		if i == v.selected {
			mark = ">"
		}
		status := ""
		if r.Status != 0 || r.ErrorClass != "" {
			status = strings.TrimSpace(fmt.Sprintf("%s %s", statusText(r.Status), r.ErrorClass))
		}
		fmt.Fprintf(tw, "%s %s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", mark, r.State, r.TaskIndex, r.Repeat, r.Attempt, r.RolloutID, r.Agent,
			orDash(string(r.Stage)), turnText(r.Turn), fmtMS(r.ElapsedMS), fmtMS(r.SinceProgressMS), status)
	}
	_ = tw.Flush()
	lines = append(lines, strings.Split(strings.TrimRight(tb.String(), "\n"), "\n")...)
	if height > 0 && len(lines) > height {
		lines = lines[:height]
	}
	return lines
}

// rolloutDetail is the detail pane of one rollout: its identity, trace
// and recent steps.
func rolloutDetail(r live.Rollout) []string {
	out := []string{fmt.Sprintf("ROLLOUT %s  task %d  repeat %d  attempt %d  agent %s  state %s", r.RolloutID, r.TaskIndex, r.Repeat, r.Attempt, r.Agent, r.State)}
	if r.TraceID != "" {
		out = append(out, "  trace id "+r.TraceID)
	}
	if r.Stage != "" {
		out = append(out, fmt.Sprintf("  now %s%s for %s", r.Stage, turnSuffix(r.Turn), fmtMS(r.StageElapsedMS)))
	}
	if len(r.Steps) == 0 {
		return append(out, "  no steps reported")
	}
	for _, st := range r.Steps {
		out = append(out, fmt.Sprintf("  %s  %s%s  %s  %s", st.Start.Format("15:04:05.000"), st.Stage, turnSuffix(st.Turn), fmtMS(st.DurationMS), statusText(st.Status)))
	}
	return out
}

func turnText(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func turnSuffix(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (turn %d)", n)
}

func statusText(code int) string {
	if code == 0 {
		return "no answer"
	}
	return fmt.Sprint(code)
}

// fmtMS writes a duration in milliseconds for a column: "-" for none.
func fmtMS(ms float64) string {
	switch {
	case ms <= 0:
		return "-"
	case ms < 10:
		return fmt.Sprintf("%.1fms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.0fms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.1fs", ms/1000)
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func orDash(s string) string { return cmp.Or(s, "-") }
