package gymconfig

import "fmt"

// Launch is a server process's view of the launch contract: the fleet's
// resolved config and the instance it was started as.
type Launch struct {
	// Config is the whole resolved config.
	Config *Config
	// Self is the instance named by NEMO_GYM_CONFIG_PATH.
	Self Instance
}

// LaunchFromEnv reads EnvConfigDict and EnvConfigPath with lookup (which
// also answers oc.env). ok is false, with a nil error, when
// NEMO_GYM_CONFIG_PATH is unset or empty: the process was not launched by a
// fleet. Errors name the variable: the dict unset while the path is set, a
// broken YAML (with its line), a path naming no instance (the nearest one
// suggested).
func LaunchFromEnv(lookup func(string) (string, bool)) (l *Launch, ok bool, err error) {
	name, set := lookup(EnvConfigPath)
	if !set || name == "" {
		return nil, false, nil
	}
	doc, set := lookup(EnvConfigDict)
	if !set || doc == "" {
		return nil, false, fmt.Errorf("%s is not set, but %s is (%q)", EnvConfigDict, EnvConfigPath, name)
	}
	d, err := Parse([]byte(doc))
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", EnvConfigDict, err)
	}
	cfg, err := d.Resolve(lookup)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", EnvConfigDict, err)
	}
	self, found := cfg.Instance(name)
	if !found {
		if _, isKey := cfg.Root[name]; isKey {
			return nil, false, fmt.Errorf("%s: %q is a key of %s but not a server instance", EnvConfigPath, name, EnvConfigDict)
		}
		return nil, false, fmt.Errorf("%s: no instance %q in %s%s", EnvConfigPath, name, EnvConfigDict, didYouMean(name, cfg.instanceNames()))
	}
	return &Launch{Config: cfg, Self: self}, true, nil
}

// Addr is Self's host:port, the address to bind (upstream's parser has
// filled both before the launch).
func (l *Launch) Addr() string { return l.Self.Addr() }

// PeerURL is the URL of the instance that Self's reference field (e.g.
// "model_server") names.
func (l *Launch) PeerURL(field string) (string, error) {
	refs := l.Self.Refs()
	ref, ok := refs[field]
	if !ok {
		return "", fmt.Errorf("instance %q has no reference field %q%s", l.Self.Name, field, didYouMean(field, sortedRefFields(refs)))
	}
	peer, ok := l.Config.Instance(ref.Name)
	if !ok || peer.Type != ref.Type {
		var same []string
		for _, o := range l.Config.Instances {
			if o.Type == ref.Type {
				same = append(same, o.Name)
			}
		}
		return "", fmt.Errorf("instance %q field %q references %s %q, which is not defined%s", l.Self.Name, field, ref.Type, ref.Name, didYouMean(ref.Name, same))
	}
	u, err := l.Config.URL(ref.Name)
	if err != nil {
		return "", fmt.Errorf("instance %q field %q: %w", l.Self.Name, field, err)
	}
	return u, nil
}

func sortedRefFields(refs map[string]Ref) []string {
	m := make(map[string]any, len(refs))
	for k := range refs {
		m[k] = nil
	}
	return sortedKeys(m)
}
