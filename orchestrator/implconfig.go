package orchestrator

import (
	"encoding/json"
	"fmt"

	"github.com/gymlens/gymlens/servers/registry"
)

// checkImplConfig decodes a server's `config:` into its implementation's
// Config, so a typo in a key or a bad value is reported before anything is
// spawned rather than as a child that fails (or, worse, silently ignores
// the key).
func checkImplConfig(s ServerSpec) error {
	if len(s.Config) == 0 {
		return nil
	}
	impl, ok := registry.ByName(s.Impl)
	if !ok {
		return nil // reported by Validate
	}
	raw, err := json.Marshal(s.Config)
	if err != nil {
		return err
	}
	cfg, err := impl.Decode(raw)
	if err != nil {
		return err
	}
	// An agent's peer URLs are filled in at spawn time; Validate of the
	// registry leaves them out.
	if err := impl.Validate(cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}
