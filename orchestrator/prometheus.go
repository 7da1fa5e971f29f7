package orchestrator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/contract"
	gymprom "github.com/gymlens/gymlens/deploy/prometheus"
)

// Files the orchestrator writes under runs/<run id>/ when processes serve
// Prometheus metrics.
const (
	// PrometheusDir is the run-directory subdirectory holding them
	// (contract.RunPrometheusDir).
	PrometheusDir = contract.RunPrometheusDir
	// PrometheusTargetsFile is the file_sd target list, one target per
	// process.
	PrometheusTargetsFile = "targets.json"
	// PrometheusConfigFile is a complete Prometheus configuration that
	// scrapes the targets and loads the shipped rules.
	PrometheusConfigFile = "prometheus.yml"
	// PrometheusJob is the scrape job name, hence the job label.
	PrometheusJob = "gym"
)

// Target labels the file_sd list puts on every series of a process. They
// have names of their own so they never collide with the nemo_gym_*
// resource labels that the exporter puts on target_info.
const (
	LabelServerName = "gym_server_name"
	LabelServerType = "gym_server_type"
	LabelRunID      = "gym_run_id"
)

// DefaultScrapeInterval is used when WritePrometheusConfig is given no
// interval. A fleet on one machine is cheap to scrape, and runs are often
// only minutes long, so it is shorter than Prometheus's own 1 m default.
const DefaultScrapeInterval = 5 * time.Second

// promTargetGroup is one entry of a file_sd list.
type promTargetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// promConfig is the part of a Prometheus configuration this package writes.
type promConfig struct {
	Global        promGlobal     `yaml:"global"`
	RuleFiles     []string       `yaml:"rule_files"`
	ScrapeConfigs []promScrapeCf `yaml:"scrape_configs"`
}

type promGlobal struct {
	ScrapeInterval     string `yaml:"scrape_interval"`
	ScrapeTimeout      string `yaml:"scrape_timeout"`
	EvaluationInterval string `yaml:"evaluation_interval"`
}

type promScrapeCf struct {
	JobName       string       `yaml:"job_name"`
	FileSDConfigs []promFileSD `yaml:"file_sd_configs"`
}

type promFileSD struct {
	Files           []string `yaml:"files"`
	RefreshInterval string   `yaml:"refresh_interval"`
}

// WritePrometheusConfig writes, under runDir/prometheus/:
//
//   - targets.json: a Prometheus file_sd list with one target per process
//     that serves metrics (the orchestrator first, at
//     orchestratorMetricsAddr, then servers in order), each labelled with
//     gym_server_name, gym_server_type and gym_run_id;
//   - rules.yml: the rules shipped in deploy/prometheus;
//   - prometheus.yml: a configuration that loads those rules and scrapes
//     the targets as job "gym" every scrapeInterval (0 means
//     DefaultScrapeInterval), with absolute paths, so
//     `prometheus --config.file=runs/<id>/prometheus/prometheus.yml` works
//     from any directory.
//
// Processes without a metrics address are left out. When no process has
// one, nothing is written and the error is nil. An address bound to every
// interface (0.0.0.0, ::) is listed as the loopback address of the same
// family. targets.json is replaced atomically, so calling this again after
// the fleet changed is safe while a Prometheus watches the file.
func WritePrometheusConfig(runDir, runID string, orchestratorMetricsAddr string, servers []ServerInfo, scrapeInterval time.Duration) error {
	type proc struct{ name, typ, addr string }
	procs := []proc{{"orchestrator", contract.ServerTypeOrchestrator, orchestratorMetricsAddr}}
	for _, s := range servers {
		procs = append(procs, proc{s.Spec.Name, s.Spec.Type, s.MetricsAddr})
	}
	var groups []promTargetGroup
	var errs []error
	for _, p := range procs {
		if p.addr == "" {
			continue
		}
		target, err := scrapeTarget(p.addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s metrics address: %w", p.name, err))
			continue
		}
		labels := map[string]string{LabelServerName: p.name, LabelServerType: p.typ}
		if runID != "" {
			labels[LabelRunID] = runID
		}
		groups = append(groups, promTargetGroup{Targets: []string{target}, Labels: labels})
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("orchestrator: prometheus targets: %w", err)
	}
	if len(groups) == 0 {
		return nil
	}
	if scrapeInterval <= 0 {
		scrapeInterval = DefaultScrapeInterval
	}
	abs, err := filepath.Abs(runDir)
	if err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}
	dir := filepath.Join(abs, PrometheusDir)
	if err := os.MkdirAll(dir, contract.RunDirPerm); err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}

	targets, err := json.MarshalIndent(groups, "", "  ")
	if err != nil {
		return fmt.Errorf("orchestrator: prometheus targets: %w", err)
	}
	cfg := promConfig{
		Global: promGlobal{
			ScrapeInterval: promDuration(scrapeInterval),
			// Prometheus refuses a timeout above the interval; its
			// default is 10 s.
			ScrapeTimeout:      promDuration(min(scrapeInterval, 10*time.Second)),
			EvaluationInterval: promDuration(scrapeInterval),
		},
		RuleFiles: []string{filepath.Join(dir, gymprom.RulesFile)},
		ScrapeConfigs: []promScrapeCf{{
			JobName: PrometheusJob,
			FileSDConfigs: []promFileSD{{
				Files: []string{filepath.Join(dir, PrometheusTargetsFile)},
				// Prometheus also watches the file; this is the fallback.
				RefreshInterval: "30s",
			}},
		}},
	}
	var body bytes.Buffer
	enc := yaml.NewEncoder(&body)
	enc.SetIndent(2)
	if err := errors.Join(enc.Encode(cfg), enc.Close()); err != nil {
		return fmt.Errorf("orchestrator: prometheus config: %w", err)
	}
	header := "# Generated by gym for run " + runID + ". Start a Prometheus 2.x on it with\n" +
		"#   prometheus --config.file=" + filepath.Join(dir, PrometheusConfigFile) + "\n" +
		"# Targets: " + PrometheusTargetsFile + " (file_sd); rules: " + gymprom.RulesFile + " (from deploy/prometheus).\n"

	// Rules and configuration before the targets: a Prometheus already
	// watching targets.json never sees targets without their config.
	if err := writeFileAtomic(filepath.Join(dir, gymprom.RulesFile), []byte(gymprom.Rules())); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, PrometheusConfigFile), append([]byte(header), body.Bytes()...)); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, PrometheusTargetsFile), append(targets, '\n'))
}

// scrapeTarget turns a bound listen address into one a scraper on this
// machine can reach.
func scrapeTarget(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return "", fmt.Errorf("%q has no usable port", addr)
	}
	ip := net.ParseIP(host)
	switch {
	case host == "" || (ip != nil && ip.IsUnspecified() && ip.To4() != nil):
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	return net.JoinHostPort(host, port), nil
}

// promDuration formats d the way Prometheus parses durations: whole
// seconds when it has no fraction of one, else whole milliseconds.
func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(max(int64(d/time.Millisecond), 1), 10) + "ms"
}

// writeFileAtomic replaces path by way of a temporary file in the same
// directory, so a reader sees the old content or the new, never a part.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("orchestrator: write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), contract.RunFilePerm); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("orchestrator: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("orchestrator: %w", err)
	}
	return nil
}
