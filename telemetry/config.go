package telemetry

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/lens"
)

// Config is the `telemetry:` block of a Gym YAML configuration.
type Config struct {
	// Present is true when the document had a telemetry block.
	Present bool
	// Values maps lens setting keys (lens.KeyEnabled, ...) to the raw text
	// the block gave them.
	Values map[string]string
}

// yamlKeys maps each YAML key of the telemetry block to its lens setting;
// the keys are the YAML column of lens's settings table.
var yamlKeys = func() map[string]string {
	m := map[string]string{}
	for _, s := range lens.Settings() {
		m[s.YAML] = s.Key
	}
	return m
}()

// YAMLKey returns the telemetry-block key for a lens setting key.
func YAMLKey(settingKey string) string {
	for y, k := range yamlKeys {
		if k == settingKey {
			return y
		}
	}
	return ""
}

// YAMLKeys returns every key the telemetry block understands, sorted.
func YAMLKeys() []string {
	out := make([]string, 0, len(yamlKeys))
	for k := range yamlKeys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ConfigFromYAML reads the top-level `telemetry:` block of a Gym YAML
// document. A missing block yields the defaults (telemetry disabled). Lists
// are accepted where the setting is a comma list (span_groups, exporter).
// Every value is validated; an unknown key is an error naming it and the
// nearest known key (`telemetry.enabeld: unknown key (did you mean
// "enabled"?)`).
func ConfigFromYAML(doc []byte) (Config, error) {
	var top struct {
		Telemetry yaml.Node `yaml:"telemetry"`
	}
	if err := yaml.Unmarshal(doc, &top); err != nil {
		return Config{}, fmt.Errorf("telemetry: parse YAML: %w", err)
	}
	cfg := Config{Values: map[string]string{}}
	n := &top.Telemetry
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == 0 || n.Tag == "!!null" {
		return cfg, nil
	}
	cfg.Present = true
	if n.Kind != yaml.MappingNode {
		return Config{}, fmt.Errorf("telemetry: line %d: the telemetry block must be a mapping", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" {
			return Config{}, fmt.Errorf("telemetry: line %d: merge keys (<<) are not supported in the telemetry block", k.Line)
		}
		for v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return Config{}, fmt.Errorf("telemetry: line %d: telemetry keys must be plain values", k.Line)
		}
		key := strings.ToLower(strings.TrimSpace(k.Value))
		setting, known := yamlKeys[key]
		if !known {
			hint := ""
			if near := gymconfig.Nearest(key, YAMLKeys()); near != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", near)
			}
			return Config{}, fmt.Errorf("telemetry: line %d: telemetry.%s: unknown key%s", k.Line, key, hint)
		}
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue // "key:" with no value: as if absent
		}
		text, err := scalarText(v)
		if err != nil {
			return Config{}, fmt.Errorf("telemetry: line %d: telemetry.%s: %w", v.Line, key, err)
		}
		cfg.Values[setting] = text
	}
	// Validate the block on its own: the environment plays no part here.
	if _, err := cfg.load(func(string) (string, bool) { return "", false }); err != nil {
		return Config{}, fmt.Errorf("telemetry: %w", err)
	}
	return cfg, nil
}

func scalarText(v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return "", nil
		}
		return v.Value, nil
	case yaml.SequenceNode:
		parts := make([]string, 0, len(v.Content))
		for _, c := range v.Content {
			for c.Kind == yaml.AliasNode {
				c = c.Alias
			}
			if c.Kind != yaml.ScalarNode {
				return "", errors.New("list items must be plain values")
			}
			parts = append(parts, c.Value)
		}
		return strings.Join(parts, ","), nil
	}
	return "", errors.New("must be a plain value or a list")
}

// load resolves the effective lens configuration: environment (through
// lookup) over this block over the defaults.
func (c Config) load(lookup func(string) (string, bool)) (lens.Config, error) {
	return lens.LoadConfig(c.loadOptions(lookup))
}

func (c Config) loadOptions(lookup func(string) (string, bool)) lens.LoadOptions {
	return lens.LoadOptions{
		Lookup:        lookup,
		Overlay:       c.Values,
		OverlayOrigin: func(key string) string { return "yaml telemetry." + YAMLKey(key) },
		Groups:        GroupSet(),
	}
}

// Effective returns the configuration a process would run with given this
// block and the current environment, with the source of every value.
func (c Config) Effective() (lens.Config, error) { return c.load(os.LookupEnv) }

// EnvVar is one variable ConfigureEnv writes, with where its value comes
// from ("yaml telemetry.exporter", "telemetry enabled", "run id").
type EnvVar struct {
	Name, Value, From string
}

// ConfigureEnv is the orchestrator's step before it spawns servers: it
// validates the block together with the environment, and when telemetry is
// enabled (by the block or by the environment) it writes each configured
// value to NEMO_GYM_OTEL_* (or its OTEL_* name) where neither that variable
// nor its NEMO_LENS_* fallback is set, so the user's environment always
// wins. It mints one run id (RUN_ID from env or block, else SLURM_JOB_ID,
// else 12 random hex characters), exports it and returns it. When telemetry
// is disabled it writes nothing and returns "". On error nothing is written.
// PlanEnv says what it writes without writing it.
func ConfigureEnv(cfg Config) (runID string, err error) {
	vars, runID, err := PlanEnv(cfg, os.LookupEnv)
	if err != nil {
		return "", err
	}
	for _, w := range vars {
		if err := os.Setenv(w.Name, w.Value); err != nil {
			return "", fmt.Errorf("telemetry: set %s: %w", w.Name, err)
		}
	}
	return runID, nil
}

// PlanEnv is ConfigureEnv without the writing: the variables it would set,
// in the order it sets them, and the run id, for an environment read
// through lookup. A run id is minted when none is given.
func PlanEnv(cfg Config, lookup func(string) (string, bool)) (vars []EnvVar, runID string, err error) {
	opts := cfg.loadOptions(lookup)
	eff, err := lens.LoadConfig(opts)
	if err != nil {
		return nil, "", fmt.Errorf("telemetry: %w", err)
	}
	if !eff.Enabled {
		return nil, "", nil
	}
	setIfUnset := func(key, value, from string) {
		if _, _, set := opts.LookupVar(key); set {
			return
		}
		name := key
		if !strings.HasPrefix(key, "OTEL_") {
			name = lens.PrimaryPrefix + key
		}
		vars = append(vars, EnvVar{name, value, from})
	}
	keys := make([]string, 0, len(cfg.Values))
	for k := range cfg.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		// An empty value is unset (lens reads it so), so it is not written.
		if k == lens.KeyRunID || strings.TrimSpace(cfg.Values[k]) == "" {
			continue
		}
		setIfUnset(k, envText(k, cfg.Values[k]), "yaml telemetry."+YAMLKey(k))
	}
	setIfUnset(lens.KeyEnabled, "1", "telemetry enabled")
	// What nobody set goes out as its default, as NeMo Gym's launcher
	// writes it (telemetry/setup.py configure_telemetry_env): a Python
	// server under this orchestrator then names its service and picks its
	// groups and exporter as a Go one does, not by nemo-lens's defaults.
	for _, s := range lens.Settings() {
		if !s.Exported {
			continue
		}
		if strings.TrimSpace(cfg.Values[s.Key]) != "" {
			continue // written above
		}
		setIfUnset(s.Key, envText(s.Key, s.Default), "default, exported for every server")
	}

	if runID = chooseRunID(eff, lookup); runID == "" {
		runID = NewRunID()
	}
	setIfUnset(lens.KeyRunID, runID, "run id")
	return vars, runID, nil
}

// envText is the text of setting key as NeMo Gym's launcher writes it
// into a server's environment: a switch as 1 or 0 (a text ParseBool does
// not take is left for the server's own check to refuse), anything else
// as given.
func envText(key, text string) string {
	for _, s := range lens.Settings() {
		if s.Key != key || !s.Boolean() {
			continue
		}
		if b, err := lens.ParseBool(text); err == nil {
			if b {
				return "1"
			}
			return "0"
		}
	}
	return text
}

// RunID is the run id a fleet with this block is given whether or not
// telemetry is on: the run_id setting (NEMO_GYM_OTEL_RUN_ID, then the
// block's run_id), else SLURM_JOB_ID; "" when none is set (the caller mints
// one with NewRunID). ConfigureEnv exports the same choice.
func (c Config) RunID(lookup func(string) (string, bool)) (string, error) {
	eff, err := lens.LoadConfig(c.loadOptions(lookup))
	if err != nil {
		return "", fmt.Errorf("telemetry: %w", err)
	}
	return chooseRunID(eff, lookup), nil
}

// chooseRunID is the choice RunID describes.
func chooseRunID(eff lens.Config, lookup func(string) (string, bool)) string {
	if eff.RunID != "" { // env first, then the block
		return eff.RunID
	}
	if v, ok := lookup("SLURM_JOB_ID"); ok {
		return strings.TrimSpace(v)
	}
	return ""
}

// NewRunID returns 12 random lowercase hex characters.
func NewRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
