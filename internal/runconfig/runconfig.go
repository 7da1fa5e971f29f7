// Package runconfig is the one definition of a run directory's config.yaml
// (contract.RunConfigFile): the record of what a run used, which the fleet
// commands (gymlens run, gymlens env start) write and gymlens report reads.
// Its key names are defined here and nowhere else; the keys of its
// telemetry block are the YAML column of lens's settings table
// (telemetry.YAMLKey).
//
// The file is gymlens's own: no NeMo Gym server reads it. Its fleet key
// holds the fleet's config dict as NeMo Gym writes it, kept as a plain map
// so that its keys and layout stay exactly the dict's.
package runconfig

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/telemetry"
)

// File is config.yaml. Its fields are declared in the order of their keys'
// names, which is the order the file has always listed them in (it was
// written from a map, whose keys the YAML encoder sorts).
type File struct {
	// Fleet is the fleet's config dict, resolved and redacted (secrets
	// replaced, URLs scrubbed of credentials).
	Fleet map[string]any `yaml:"fleet"`
	// HeadServerURL is the head server's URL, known once the fleet runs;
	// "" (and left out of the file) before.
	HeadServerURL string `yaml:"head_server_url,omitempty"`
	// RunID is the run's id.
	RunID string `yaml:"run_id"`
	// Servers are the fleet's servers, in the fleet's order.
	Servers []Server `yaml:"servers"`
	// Telemetry is every telemetry setting as the orchestrator process
	// resolved it, by telemetry-block key (TelemetryKey).
	Telemetry map[string]string `yaml:"telemetry"`
	// TelemetrySources says where each value of Telemetry came from, by the
	// same keys ("env NAME", "yaml telemetry.<key>", "default").
	TelemetrySources map[string]string `yaml:"telemetry_sources"`
}

// Server is one entry of File.Servers.
type Server struct {
	// Name is the server's name in the config dict.
	Name string `yaml:"name"`
	// Type is its server type, such as resources_servers.
	Type string `yaml:"type"`
	// Impl is the implementation it runs.
	Impl string `yaml:"impl"`
	// URL is where it serves, once the fleet runs.
	URL string `yaml:"url,omitempty"`
	// PID is its process id, once the fleet runs.
	PID int `yaml:"pid,omitempty"`
	// Command is the command line of an external server.
	Command string `yaml:"command,omitempty"`
}

// TelemetryKey returns the key under which File.Telemetry holds lens
// setting settingKey (lens.KeyEnabled, ...): its telemetry-block key, or,
// for a setting without one, the setting key in lower case.
func TelemetryKey(settingKey string) string {
	if k := telemetry.YAMLKey(settingKey); k != "" {
		return k
	}
	return strings.ToLower(settingKey)
}

// SetTelemetry records the value of lens setting settingKey and where it
// came from.
func (f *File) SetTelemetry(settingKey, value, origin string) {
	if f.Telemetry == nil {
		f.Telemetry = map[string]string{}
	}
	if f.TelemetrySources == nil {
		f.TelemetrySources = map[string]string{}
	}
	key := TelemetryKey(settingKey)
	f.Telemetry[key] = value
	f.TelemetrySources[key] = origin
}

// TelemetryValue returns the recorded value of lens setting settingKey and
// whether the file has one.
func (f File) TelemetryValue(settingKey string) (string, bool) {
	v, ok := f.Telemetry[TelemetryKey(settingKey)]
	return v, ok
}

// Marshal renders f as config.yaml's text.
func (f File) Marshal() ([]byte, error) {
	b, err := yaml.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", contract.RunConfigFile, err)
	}
	return b, nil
}

// Parse reads config.yaml's text. A scalar of the telemetry block that is
// not a string (enabled: true, say, in a file edited by hand) reads as its
// text.
func Parse(b []byte) (File, error) {
	var f File
	if err := yaml.Unmarshal(b, &f); err != nil {
		return File{}, fmt.Errorf("parse %s: %w", contract.RunConfigFile, err)
	}
	return f, nil
}
