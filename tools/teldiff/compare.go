package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/otlptranslator"
)

// Verdicts of a row.
const (
	Same         = "same"
	OnlyGymlens  = "only gymlens"
	OnlyUpstream = "only upstream"
	differsWord  = "differs"
)

// Row is one line of the comparison table.
type Row struct {
	Section  string `json:"section"`
	Item     string `json:"item"`
	Gymlens  string `json:"gymlens"`
	Upstream string `json:"upstream"`
	// Verdict is Same, OnlyGymlens, OnlyUpstream or "differs: how".
	Verdict string `json:"verdict"`
}

// perProcessResource are resource keys whose values name one process or
// run, so only their presence is compared.
var perProcessResource = []string{"process.pid", "service.instance.id", "nemo.run.id"}

// isVolatileAttr reports whether an attribute's values depend on the run
// (ports, peers, ids, user agents) rather than on the implementation, so
// only the key is compared.
func isVolatileAttr(key string) bool {
	for _, suffix := range []string{".port", ".ip", ".address"} {
		if strings.HasSuffix(key, suffix) {
			return true
		}
	}
	switch key {
	case "http.host", "http.server_name", "http.url", "url.full", "http.user_agent", "user_agent.original",
		"nemo.gym.rollout.id", "process.pid", "service.instance.id", "nemo.run.id":
		return true
	}
	return false
}

// Compare builds the table rows of gymlens's recording g against
// upstream's u: resource, scopes, metrics, Prometheus series, spans, and,
// when traceID (hex) is not empty, which spans joined that trace (the one
// a request's traceparent named).
func Compare(g, u *Summary, traceID string) []Row {
	var rows []Row
	rows = append(rows, compareResource(g, u)...)
	for _, signal := range []string{"traces", "metrics", "logs"} {
		for _, scope := range union(g.Scopes[signal], u.Scopes[signal]) {
			inG, inU := slices.Contains(g.Scopes[signal], scope), slices.Contains(u.Scopes[signal], scope)
			rows = append(rows, presenceRow("scope ("+signal+")", scope, inG, inU, "yes", "yes"))
		}
	}
	for _, name := range union(slices.Collect(maps.Keys(g.Metrics)), slices.Collect(maps.Keys(u.Metrics))) {
		rows = append(rows, compareMetric(name, g.Metrics[name], u.Metrics[name]))
	}
	for _, name := range union(slices.Collect(maps.Keys(g.Metrics)), slices.Collect(maps.Keys(u.Metrics))) {
		rows = append(rows, comparePrometheus(name, g.Metrics[name], u.Metrics[name]))
	}
	for _, name := range union(slices.Collect(maps.Keys(g.Spans)), slices.Collect(maps.Keys(u.Spans))) {
		rows = append(rows, compareSpan(name, g.Spans[name], u.Spans[name]))
	}
	if traceID != "" {
		gs, us := strings.Join(InTrace(g, traceID), ", "), strings.Join(InTrace(u, traceID), ", ")
		r := Row{Section: "traceparent", Item: traceID, Gymlens: gs, Upstream: us, Verdict: Same}
		if gs != us {
			r.Verdict = differsWord + ": spans in the trace " + list(InTrace(g, traceID)) + " vs " + list(InTrace(u, traceID))
		}
		if gs == "" {
			r.Gymlens = "(none)"
		}
		if us == "" {
			r.Upstream = "(none)"
		}
		rows = append(rows, r)
	}
	return rows
}

// InTrace names the spans of s that belong to the trace traceID (hex),
// sorted.
func InTrace(s *Summary, traceID string) []string {
	var out []string
	for name, sp := range s.Spans {
		if slices.Contains(sp.TraceIDs, traceID) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func compareResource(g, u *Summary) []Row {
	var rows []Row
	for _, key := range union(slices.Collect(maps.Keys(g.Resource)), slices.Collect(maps.Keys(u.Resource))) {
		gv, inG := g.Resource[key]
		uv, inU := u.Resource[key]
		gs, us := strings.Join(gv, ", "), strings.Join(uv, ", ")
		if slices.Contains(perProcessResource, key) {
			gs, us = "(per process)", "(per process)"
		}
		row := presenceRow("resource", key, inG, inU, gs, us)
		if inG && inU && !slices.Contains(perProcessResource, key) && !slices.Equal(gv, uv) {
			row.Verdict = differsWord + ": " + gs + " vs " + us
		}
		rows = append(rows, row)
	}
	return rows
}

// presenceRow is a row whose verdict is Same when the item is on both
// sides and says which side has it otherwise.
func presenceRow(section, item string, inG, inU bool, gs, us string) Row {
	r := Row{Section: section, Item: item, Gymlens: "-", Upstream: "-", Verdict: Same}
	if inG {
		r.Gymlens = gs
	}
	if inU {
		r.Upstream = us
	}
	switch {
	case inG && !inU:
		r.Verdict = OnlyGymlens
	case inU && !inG:
		r.Verdict = OnlyUpstream
	}
	return r
}

func compareMetric(name string, g, u *Metric) Row {
	r := presenceRow("metric", name, g != nil, u != nil, describeMetric(g), describeMetric(u))
	if g == nil || u == nil {
		return r
	}
	var how []string
	how = appendDiff(how, "kind", g.Kinds, u.Kinds)
	how = appendDiff(how, "unit", g.Units, u.Units)
	how = appendDiff(how, "value type", g.ValueTypes, u.ValueTypes)
	how = appendDiff(how, "temporality", g.Temporalities, u.Temporalities)
	how = appendDiff(how, "bounds", g.Bounds, u.Bounds)
	how = appendDiff(how, "scope", g.Scopes, u.Scopes)
	how = append(how, attrDiff(g.AttrKeys, u.AttrKeys, g.AttrValues, u.AttrValues)...)
	return withHow(r, how)
}

func compareSpan(name string, g, u *Span) Row {
	r := presenceRow("span", name, g != nil, u != nil, describeSpan(g), describeSpan(u))
	if g == nil || u == nil {
		return r
	}
	var how []string
	how = appendDiff(how, "kind", g.Kinds, u.Kinds)
	how = appendDiff(how, "scope", g.Scopes, u.Scopes)
	how = appendDiff(how, "status", g.Statuses, u.Statuses)
	how = appendDiff(how, "events", g.Events, u.Events)
	how = append(how, attrDiff(g.AttrKeys, u.AttrKeys, g.AttrValues, u.AttrValues)...)
	return withHow(r, how)
}

func comparePrometheus(name string, g, u *Metric) Row {
	gs, us := "", ""
	if g != nil {
		gs = describeSeries(PrometheusSeries(name, g))
	}
	if u != nil {
		us = describeSeries(PrometheusSeries(name, u))
	}
	r := presenceRow("prometheus", name, g != nil, u != nil, gs, us)
	if g != nil && u != nil && gs != us {
		r.Verdict = differsWord + ": " + gs + " vs " + us
	}
	return r
}

func withHow(r Row, how []string) Row {
	if len(how) > 0 {
		r.Verdict = differsWord + ": " + strings.Join(how, "; ")
	}
	return r
}

func appendDiff(how []string, what string, g, u []string) []string {
	if slices.Equal(g, u) {
		return how
	}
	return append(how, fmt.Sprintf("%s %s vs %s", what, list(g), list(u)))
}

// attrDiff says which attribute keys one side lacks and, for keys of few
// values on both sides whose values do not depend on the run, which
// values differ.
func attrDiff(gk, uk []string, gv, uv map[string][]string) []string {
	var how []string
	if only := minus(gk, uk); len(only) > 0 {
		how = append(how, "attrs only gymlens: "+strings.Join(only, ", "))
	}
	if only := minus(uk, gk); len(only) > 0 {
		how = append(how, "attrs only upstream: "+strings.Join(only, ", "))
	}
	for _, k := range gk {
		a, okA := gv[k]
		b, okB := uv[k]
		if !okA || !okB || isVolatileAttr(k) || slices.Equal(a, b) {
			continue
		}
		how = append(how, fmt.Sprintf("%s values %s vs %s", k, list(a), list(b)))
	}
	return how
}

// PrometheusSeries is what the OpenTelemetry Prometheus exporter (with
// its default translation, underscore escaping with suffixes) makes of a
// metric: the series names and their label names, sorted. The names come
// from otlptranslator, as the exporter's do; an explicit histogram becomes
// _bucket, _sum and _count with the label le. Every series also carries
// the exporter's scope labels.
func PrometheusSeries(name string, m *Metric) (names, labels []string) {
	namer := otlptranslator.NewMetricNamer("", otlptranslator.UnderscoreEscapingWithSuffixes)
	labelNamer := otlptranslator.LabelNamer{}
	unit := ""
	if len(m.Units) > 0 && m.Units[0] != "(none)" {
		unit = m.Units[0]
	}
	nameSet, labelSet := set{}, set{"otel_scope_name": {}, "otel_scope_version": {}, "otel_scope_schema_url": {}}
	for _, k := range m.AttrKeys {
		if l, err := labelNamer.Build(k); err == nil {
			labelSet.add(l)
		}
	}
	for _, kind := range m.Kinds {
		typ := otlptranslator.MetricType(otlptranslator.MetricTypeUnknown)
		var suffixes []string
		switch kind {
		case "gauge":
			typ = otlptranslator.MetricTypeGauge
		case "sum (monotonic)":
			typ = otlptranslator.MetricTypeMonotonicCounter
		case "sum (non-monotonic)":
			typ = otlptranslator.MetricTypeNonMonotonicCounter
		case "histogram":
			typ, suffixes = otlptranslator.MetricTypeHistogram, []string{"_bucket", "_sum", "_count"}
			labelSet.add("le")
		case "exponential histogram":
			typ = otlptranslator.MetricTypeHistogram // a native histogram: one series
		case "summary":
			typ, suffixes = otlptranslator.MetricTypeSummary, []string{"", "_sum", "_count"}
			labelSet.add("quantile")
		}
		base, err := namer.Build(otlptranslator.Metric{Name: name, Unit: unit, Type: typ})
		if err != nil {
			nameSet.add("(untranslatable: " + err.Error() + ")")
			continue
		}
		if suffixes == nil {
			suffixes = []string{""}
		}
		for _, s := range suffixes {
			nameSet.add(base + s)
		}
	}
	return nameSet.sorted(), labelSet.sorted()
}

func describeSeries(names, labels []string) string {
	return strings.Join(names, " ") + " {" + strings.Join(labels, ",") + "}"
}

func describeMetric(m *Metric) string {
	if m == nil {
		return "-"
	}
	parts := []string{strings.Join(m.Kinds, "/"), "unit " + strings.Join(m.Units, "/")}
	if len(m.ValueTypes) > 0 {
		parts = append(parts, strings.Join(m.ValueTypes, "/"))
	}
	if len(m.Temporalities) > 0 {
		parts = append(parts, strings.Join(m.Temporalities, "/"))
	}
	for _, b := range m.Bounds {
		n := strings.Count(b, ",") + 1
		if b == "" {
			n = 0
		}
		first, _, _ := strings.Cut(b, ",")
		last := b[strings.LastIndex(b, ",")+1:]
		parts = append(parts, fmt.Sprintf("%d bounds %s…%s", n, first, last))
	}
	parts = append(parts, "attrs "+attrList(m.AttrKeys, m.AttrValues), "scope "+strings.Join(m.Scopes, ", "))
	return strings.Join(parts, ", ")
}

func describeSpan(s *Span) string {
	if s == nil {
		return "-"
	}
	parts := []string{strings.Join(s.Kinds, "/"), "scope " + strings.Join(s.Scopes, ", "),
		"status " + strings.Join(s.Statuses, "/"), "attrs " + attrList(s.AttrKeys, s.AttrValues)}
	if len(s.Events) > 0 {
		parts = append(parts, "events "+strings.Join(s.Events, ", "))
	}
	parts = append(parts, fmt.Sprintf("%d spans", s.Count))
	return strings.Join(parts, ", ")
}

// attrList lists attribute keys, with the values of the few-valued keys
// whose values do not depend on the run.
func attrList(keys []string, values map[string][]string) string {
	if len(keys) == 0 {
		return "none"
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k
		if v, ok := values[k]; ok && !isVolatileAttr(k) {
			out[i] = k + "=" + strings.Join(v, "|")
		}
	}
	return strings.Join(out, ", ")
}

func list(v []string) string {
	if len(v) == 0 {
		return "(none)"
	}
	return "[" + strings.Join(v, " / ") + "]"
}

func union(a, b []string) []string {
	s := set{}
	for _, v := range a {
		s.add(v)
	}
	for _, v := range b {
		s.add(v)
	}
	return s.sorted()
}

// minus is a without the elements of b, in a's order.
func minus(a, b []string) []string {
	var out []string
	for _, v := range a {
		if !slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	return out
}

// WriteMarkdown writes rows as one Markdown table.
func WriteMarkdown(w io.Writer, rows []Row) error {
	cell := func(s string) string {
		s = strings.ReplaceAll(s, "|", `\|`)
		return strings.ReplaceAll(s, "\n", " ")
	}
	if _, err := fmt.Fprintln(w, "| Section | Item | gymlens | upstream | Verdict |\n|---|---|---|---|---|"); err != nil {
		return fmt.Errorf("write the table: %w", err)
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "| %s | `%s` | %s | %s | %s |\n", r.Section, cell(r.Item), cell(r.Gymlens), cell(r.Upstream), cell(r.Verdict)); err != nil {
			return fmt.Errorf("write the table: %w", err)
		}
	}
	return nil
}
