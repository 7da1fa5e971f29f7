package prometheus

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/contract"
)

// promInstrument is a contract instrument as Prometheus names it.
type promInstrument struct {
	contract.Instrument
	// series are the names of its series: the name itself, or a
	// histogram's _bucket, _sum and _count.
	series []string
}

// promInstruments maps every series name the contract's instruments
// export to Prometheus onto its instrument.
func promInstruments() map[string]promInstrument {
	out := map[string]promInstrument{}
	for _, in := range contract.Instruments() {
		name := in.PrometheusName()
		p := promInstrument{Instrument: in, series: []string{name}}
		if in.Kind == contract.Histogram {
			p.series = []string{name + "_bucket", name + "_sum", name + "_count"}
		}
		for _, s := range p.series {
			out[s] = p
		}
	}
	return out
}

// The labels the rules may use besides an instrument's attributes: the
// file_sd target labels the orchestrator writes, Prometheus's own, and
// the bucket bound.
var targetLabels = []string{"gym_run_id", "gym_server_name", "gym_server_type", "job", "instance", "le", "severity"}

var (
	// selector is a metric name with its label matchers, or a bare name.
	selector = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{([^}]*)\})?`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	grouping = regexp.MustCompile(`\b(by|without)\s*\(([^)]*)\)`)
)

// promqlWords are the PromQL functions, operators and keywords the rules
// use; any other word outside quotes, label matchers and groupings must
// be a series name.
var promqlWords = []string{"sum", "rate", "by", "without", "or", "and", "unless", "histogram_quantile",
	"max_over_time", "round", "max", "min", "count", "avg", "on", "ignoring", "bool", "offset"}

type selectorUse struct {
	name   string
	labels map[string]string
}

// selectors returns the series a PromQL expression reads, with the
// equality matchers of each.
func selectors(expr string) []selectorUse {
	var labelNames []string
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[2], ",") {
			labelNames = append(labelNames, strings.TrimSpace(l))
		}
	}
	expr = grouping.ReplaceAllString(expr, " ")
	// Durations ([5m], [6h]) are not names; recorded series
	// (level:metric:operation) are the rules' own.
	expr = regexp.MustCompile(`\[[^\]]*\]`).ReplaceAllString(expr, " ")
	var out []selectorUse
	for _, m := range selector.FindAllStringSubmatch(expr, -1) {
		name := m[1]
		if slices.Contains(promqlWords, name) || strings.Contains(name, ":") {
			continue
		}
		use := selectorUse{name: name, labels: map[string]string{}}
		for _, lm := range matcher.FindAllStringSubmatch(m[3], -1) {
			use.labels[lm[1]] = lm[3]
		}
		out = append(out, use)
	}
	for _, l := range labelNames {
		if l != "" {
			out = append(out, selectorUse{name: "", labels: map[string]string{l: ""}})
		}
	}
	return out
}

// rulesFile is the part of rules.yml the test reads.
type rulesFile struct {
	Groups []struct {
		Rules []struct {
			Record string `yaml:"record"`
			Alert  string `yaml:"alert"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// rulesTestFile is the part of rules_test.yml the test reads.
type rulesTestFile struct {
	Tests []struct {
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
	} `yaml:"tests"`
}

// checkUse holds one series use to the contract: the name is an
// instrument's series, every label is a target label or one of the
// instrument's attributes (dots as underscores), and the outcome values
// matched on are the contract's. It returns what is wrong.
func checkUse(use selectorUse, instruments map[string]promInstrument) []string {
	var problems []string
	in, ok := instruments[use.name]
	if use.name != "" && !ok {
		return []string{use.name + " is no series of the contract's instruments (contract.Instruments, PrometheusName)"}
	}
	for key, value := range use.labels {
		if slices.Contains(targetLabels, key) {
			continue
		}
		var attrs []string
		if use.name != "" {
			attrs = in.Attrs
		} else {
			for _, p := range instruments {
				attrs = append(attrs, p.Attrs...)
			}
		}
		found := ""
		for _, a := range attrs {
			if strings.ReplaceAll(a, ".", "_") == key {
				found = a
			}
		}
		if found == "" {
			problems = append(problems, "label "+key+" is neither a target label nor an attribute of "+cmpOr(use.name, "any instrument"))
			continue
		}
		if (found == contract.AttrRolloutOutcome || found == contract.AttrVerifyOutcome) && value != "" &&
			value != contract.OutcomeSuccess && value != contract.OutcomeFailure {
			problems = append(problems, key+"="+strconv.Quote(value)+" is not an outcome the contract records")
		}
	}
	return problems
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Every series the shipped rules and their unit tests read is one the
// contract's instruments export, under the name the Prometheus exporter
// gives it, with labels the instrument carries.
func TestRulesReadContractSeries(t *testing.T) {
	instruments := promInstruments()
	var rf rulesFile
	if err := yaml.Unmarshal([]byte(Rules()), &rf); err != nil {
		t.Fatalf("rules.yml: %v", err)
	}
	read := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			where := "rules.yml " + cmpOr(r.Record, r.Alert)
			for _, use := range selectors(r.Expr) {
				for _, p := range checkUse(use, instruments) {
					t.Errorf("%s: %s", where, p)
				}
				read[use.name] = true
			}
		}
	}
	// The rules follow NeMo Gym's names: the rollout counter is
	// gym.rollout.completed_total, the gauges carry no unit suffix, the
	// rollout histogram's buckets are the ms ones.
	for _, name := range []string{
		contract.MustLookup(contract.RolloutCompleted).PrometheusName(),
		contract.MustLookup(contract.VerifyCalls).PrometheusName(),
		contract.MustLookup(contract.ServersActive).PrometheusName(),
		contract.MustLookup(contract.RolloutDuration).PrometheusName() + "_bucket",
		contract.MustLookup(contract.HTTPServerRequestDuration).PrometheusName() + "_bucket",
	} {
		if !read[name] {
			t.Errorf("rules.yml reads no %s (read: %v)", name, read)
		}
	}

	raw, err := os.ReadFile("rules_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var tf rulesTestFile
	if err := yaml.Unmarshal(raw, &tf); err != nil {
		t.Fatalf("rules_test.yml: %v", err)
	}
	n := 0
	for i, tc := range tf.Tests {
		for _, s := range tc.InputSeries {
			uses := selectors(s.Series)
			if len(uses) != 1 {
				t.Fatalf("rules_test.yml test %d: cannot read series %q", i+1, s.Series)
			}
			use := uses[0]
			n++
			for _, p := range checkUse(use, instruments) {
				t.Errorf("rules_test.yml series %s: %s", s.Series, p)
			}
			// Bucket bounds are the instrument's: a gym ms histogram has the
			// OpenTelemetry default ones.
			if le, ok := use.labels["le"]; ok && le != "+Inf" {
				in := instruments[use.name]
				bounds := cmpOrBounds(in.Boundaries, contract.DefaultBucketsMS)
				v, err := strconv.ParseFloat(le, 64)
				if err != nil || !slices.Contains(bounds, v) {
					t.Errorf("rules_test.yml: %s has le=%q, not one of its boundaries %v", use.name, le, bounds)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("rules_test.yml has no input series")
	}
}

func cmpOrBounds(a, b []float64) []float64 {
	if a != nil {
		return a
	}
	return b
}

// The check itself cannot pass vacuously: a rule on a series the
// contract lacks (the removed gym.rollout.calls, a _ratio suffix), on a
// label its instrument lacks, or on an outcome it never records, is
// reported.
func TestCheckUseFindsStrangers(t *testing.T) {
	instruments := promInstruments()
	for _, expr := range []string{
		`sum(rate(gym_rollout_calls_total[5m]))`,
		`gym_verify_success_rate_ratio`,
		`gym_servers_active_servers`,
		`sum by (gym_run_id) (rate(gym_rollout_completed_total{nemo_gym_verify_outcome="success"}[5m]))`,
		`rate(gym_rollout_completed_total{nemo_gym_rollout_outcome="ok"}[5m])`,
		`sum by (nemo_gym_nothing) (gym_servers_active)`,
	} {
		var problems []string
		for _, use := range selectors(expr) {
			problems = append(problems, checkUse(use, instruments)...)
		}
		if len(problems) == 0 {
			t.Errorf("%s passed the check", expr)
		}
	}
	// And it does not flag what is right: contract series, their labels,
	// numbers, durations and recorded series.
	clean := `histogram_quantile(0.95, sum by (gym_run_id, le) (rate(gym_rollout_duration_ms_milliseconds_bucket[5m])))` +
		` or sum by (gym_run_id) (rate(gym_rollout_completed_total{nemo_gym_rollout_outcome="failure"}[5m])) * 0` +
		` or gym:rollout_success_rate:ratio_rate5m`
	for _, use := range selectors(clean) {
		if p := checkUse(use, instruments); len(p) > 0 {
			t.Errorf("%s: %v", clean, p)
		}
	}
}

// With promtool installed, the rules are valid and pass their unit tests.
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not on PATH (apt-get install prometheus); the rules' unit tests need it")
	}
	for _, args := range [][]string{{"check", "rules", RulesFile}, {"test", "rules", "rules_test.yml"}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
