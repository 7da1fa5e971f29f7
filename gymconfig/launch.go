package gymconfig

import "fmt"

// Launch is a server process's view of the launch contract: the instance
// it was started as, its block resolved, and the fleet's config, resolved
// only as far as the process reads it (see Lazy): interpolations in other
// servers' blocks that this process never reads cannot stop it.
type Launch struct {
	// Self is the instance named by NEMO_GYM_CONFIG_PATH, its block
	// resolved.
	Self Instance

	fleet *Lazy
}

// LaunchFromEnv reads EnvConfigDict and EnvConfigPath with lookup (which
// also answers oc.env). ok is false, with a nil error, when
// NEMO_GYM_CONFIG_PATH is unset or empty: the process was not launched by a
// fleet.
//
// Only Self's block is resolved (with what its interpolations reach), as
// NeMo Gym's servers resolve only their own block: a value elsewhere that
// does not resolve (an unset ${oc.env:VAR} of another server, say) is no
// error here. Peers are read by PeerURL, top-level flags by DryRun and
// Fleet, each resolving only what it reads.
//
// Errors name the variable: the dict unset while the path is set, a broken
// YAML (with its line), a path naming no instance (the nearest one
// suggested), a value of Self's block that does not resolve (with its key
// path, which may be outside the block when an interpolation led there).
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
	fleet := d.Lazy(lookup)
	self, found, err := fleet.Instance(name)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", EnvConfigDict, err)
	}
	if !found {
		if _, isKey := fleet.r.root.vals[name]; isKey {
			return nil, false, fmt.Errorf("%s: %q is a key of %s but not a server instance", EnvConfigPath, name, EnvConfigDict)
		}
		return nil, false, fmt.Errorf("%s: no instance %q in %s%s", EnvConfigPath, name, EnvConfigDict, didYouMean(name, fleet.instanceNames("")))
	}
	return &Launch{Self: self, fleet: fleet}, true, nil
}

// Addr is Self's host:port, the address to bind (upstream's parser has
// filled both before the launch).
func (l *Launch) Addr() string { return l.Self.Addr() }

// Fleet is the whole fleet config, resolved on demand: the dict
// LaunchFromEnv read, with its lookup.
func (l *Launch) Fleet() *Lazy { return l.fleet }

// DryRun reports whether the fleet config's top-level dry_run is true,
// resolving only dry_run. An error names EnvConfigDict and the key path.
func (l *Launch) DryRun() (bool, error) {
	b, err := l.fleet.DryRun()
	if err != nil {
		return false, fmt.Errorf("%s: %w", EnvConfigDict, err)
	}
	return b, nil
}

// PeerURL is the URL of the instance that Self's reference field (e.g.
// "model_server") names. Only the peer's host and port are resolved (what
// NeMo Gym's clients read); errors name Self's field, the peer and, when
// unset or unresolvable, the key.
func (l *Launch) PeerURL(field string) (string, error) {
	refs := l.Self.Refs()
	ref, ok := refs[field]
	if !ok {
		return "", fmt.Errorf("instance %q has no reference field %q%s", l.Self.Name, field, didYouMean(field, sortedRefFields(refs)))
	}
	z := l.fleet
	z.mu.Lock()
	defer z.mu.Unlock()
	z.start()
	peer, found, err := z.locate(ref.Name)
	if err != nil {
		return "", fmt.Errorf("instance %q field %q: %w", l.Self.Name, field, err)
	}
	if !found || peer.typ != ref.Type {
		return "", fmt.Errorf("instance %q field %q references %s %q, which is not defined%s", l.Self.Name, field, ref.Type, ref.Name, didYouMean(ref.Name, z.instanceNames(ref.Type)))
	}
	u, err := z.url(peer)
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
