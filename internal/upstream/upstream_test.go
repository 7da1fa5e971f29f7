package upstream_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/upstream"
)

// The installed upstream is the release the lock pins.
func TestUpstreamInstalledVersions(t *testing.T) {
	out := upstream.Run(t, time.Minute, `
import importlib.metadata as md
print(md.version("nemo-gym"), md.version("nemo-lens"), md.version("openai"))
`, nil)
	if got := strings.TrimSpace(string(out)); got != "0.7.0 0.1.0 2.44.0" {
		t.Fatalf("nemo-gym, nemo-lens, openai = %q, want 0.7.0 0.1.0 2.44.0 (scripts/upstream/requirements.lock)", got)
	}
}

// The telemetry reference is nemo-gym 0.6.0 with the released nemo-lens.
func TestUpstreamTelemetryReleaseVersions(t *testing.T) {
	py := upstream.TelemetryPython(t)
	out := upstream.RunWith(t, py, time.Minute, `
import importlib.metadata as md
import nemo_gym.telemetry, nemo.lens
print(md.version("nemo-gym"), md.version("nemo-lens"))
`, nil)
	if got := strings.TrimSpace(string(out)); got != "0.6.0 0.1.0" {
		t.Fatalf("nemo-gym, nemo-lens = %q, want 0.6.0 0.1.0 (scripts/upstream/requirements-0.6.0.lock)", got)
	}
}
