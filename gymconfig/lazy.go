package gymconfig

import (
	"fmt"
	"sync"
)

// Lazy is a dict resolved on demand: each call resolves only the values it
// reads, and what those values' interpolations reach, with the rules,
// cycle detection and error paths of Resolve. An unresolvable value
// (${oc.env:VAR} with VAR unset, a ??? value, a broken reference) is an
// error only for the calls that reach it, as in NeMo Gym, whose servers
// resolve their own block and read only the host and port of their
// peers'.
//
// A Lazy reads a snapshot of its dict, taken by Dict.Lazy; values it has
// resolved are kept for later calls. It is safe for concurrent use.
type Lazy struct {
	mu sync.Mutex
	r  *resolver
}

// Lazy returns the dict resolved on demand, with lookupEnv answering
// oc.env (nil means os.LookupEnv). Later changes to d are not seen.
func (d *Dict) Lazy(lookupEnv func(string) (string, bool)) *Lazy {
	return &Lazy{r: newResolver(d, lookupEnv)}
}

// start readies the resolver for one call: the step budget is per call.
// The caller holds z.mu.
func (z *Lazy) start() { z.r.steps = 0 }

// Value resolves the value at path (mapping keys, or decimal indices of
// list elements) and returns it as Go data (map[string]any, []any,
// scalars); an empty path is the whole dict. A path that does not exist is
// an error naming it and, for a misspelt key, the nearest one.
func (z *Lazy) Value(path ...string) (any, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.start()
	if len(path) == 0 {
		return z.r.value(nil, z.r.root)
	}
	return z.r.lookup(nil, path)
}

// Instances lists the server instances, in document order, as Refs (type
// and name), from the unresolved shape of the dict alone: a top-level key
// (not reserved, see IsReserved) whose value is a mapping holding a
// server-type key. Nothing is resolved, so values no call reads cannot
// make it fail; a top-level key whose whole value is an interpolation is
// not listed (Instance still finds it by name). A key with more than one
// server type is an error naming it.
func (z *Lazy) Instances() ([]Ref, error) {
	var out []Ref
	for _, name := range z.r.root.keys {
		if IsReserved(name) {
			continue
		}
		v, ok := z.r.root.vals[name].(*omap)
		if !ok {
			continue
		}
		typ, err := serverTypeOf(name, v)
		if err != nil {
			return nil, err
		}
		if typ != "" {
			out = append(out, Ref{Type: typ, Name: name})
		}
	}
	return out, nil
}

// instanceNames names Instances, for suggestions (best effort: nil when
// the shape is broken).
func (z *Lazy) instanceNames(typ string) []string {
	refs, _ := z.Instances()
	var names []string
	for _, r := range refs {
		if typ == "" || r.Type == typ {
			names = append(names, r.Name)
		}
	}
	return names
}

// located is an instance found by name, its block not resolved yet.
type located struct {
	name, typ, impl string
	path            keyPath // of the block
	block           any     // a raw *omap, or resolved data when resolved
	resolved        bool
}

// locate finds the instance called name, resolving only the levels of its
// shape that are interpolations (as OmegaConf does on access). found is
// false, with a nil error, when name is no top-level key, a reserved one,
// or not shaped as a server instance. The caller holds z.mu.
func (z *Lazy) locate(name string) (loc located, found bool, err error) {
	r := z.r
	raw, ok := r.root.vals[name]
	if !ok || IsReserved(name) {
		return located{}, false, nil
	}
	p := keyPath{{key: name, idx: -1}}
	top, res, err := r.shallow(p, raw, false)
	if err != nil {
		return located{}, false, err
	}
	typ, err := serverTypeOf(name, top)
	if err != nil || typ == "" {
		return located{}, false, err
	}
	p = p.with(seg{key: typ, idx: -1})
	tv, _ := mappingGet(top, typ)
	if tv, res, err = r.shallow(p, tv, res); err != nil {
		return located{}, false, err
	}
	impl, err := implOf(name, typ, tv)
	if err != nil {
		return located{}, false, err
	}
	p = p.with(seg{key: impl, idx: -1})
	bv, _ := mappingGet(tv, impl)
	if bv, res, err = r.shallow(p, bv, res); err != nil {
		return located{}, false, err
	}
	if err := checkBlock(name, typ, impl, bv); err != nil {
		return located{}, false, err
	}
	return located{name: name, typ: typ, impl: impl, path: p, block: bv, resolved: res}, true, nil
}

// shallow resolves v, found at p, when it is a raw string (an
// interpolation gives resolved data); a raw container stays raw. resolved
// says whether v is resolved data already, and is returned updated.
func (r *resolver) shallow(p keyPath, v any, resolved bool) (any, bool, error) {
	if s, ok := v.(string); ok && !resolved {
		out, err := r.value(p, s)
		return out, true, err
	}
	return v, resolved, nil
}

// Instance resolves the block of the instance called name, and only what
// its interpolations reach. found is false, with a nil error, when name is
// not a server instance (see Instances; a top-level interpolation is
// followed here). Errors are those of resolving the block, with their key
// paths, and the shape errors of Resolve.
func (z *Lazy) Instance(name string) (in Instance, found bool, err error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.start()
	loc, found, err := z.locate(name)
	if err != nil || !found {
		return Instance{}, false, err
	}
	bv := loc.block
	if !loc.resolved {
		if bv, err = z.r.value(loc.path, bv); err != nil {
			return Instance{}, false, err
		}
	}
	block, _ := bv.(map[string]any)
	if block == nil {
		block = map[string]any{}
	}
	return Instance{Name: loc.name, Type: loc.typ, Impl: loc.impl, Block: block}, true, nil
}

// field resolves key of a located block; ok is false when the block has
// no such key. The caller holds z.mu.
func (z *Lazy) field(loc located, key string) (v any, ok bool, err error) {
	v, ok = mappingGet(loc.block, key)
	if !ok || loc.resolved {
		return v, ok, nil
	}
	v, err = z.r.value(loc.path.with(seg{key: key, idx: -1}), v)
	return v, true, err
}

// url is "http://host:port" of a located instance, resolving only its
// host and port. The caller holds z.mu.
func (z *Lazy) url(loc located) (string, error) {
	in := Instance{Name: loc.name, Type: loc.typ, Impl: loc.impl, Block: map[string]any{}}
	for _, key := range []string{"host", "port"} {
		v, ok, err := z.field(loc, key)
		if err != nil {
			return "", fmt.Errorf("instance %q %s: %w", loc.name, key, err)
		}
		if ok {
			in.Block[key] = v
		}
	}
	return in.url()
}

// URL is "http://host:port" of the instance called name, resolving only
// its host and port (what NeMo Gym's clients read of a peer). Errors name
// the instance and, when unset or unresolvable, the key.
func (z *Lazy) URL(name string) (string, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.start()
	loc, found, err := z.locate(name)
	if err != nil {
		return "", err // names the instance: a shape error, or a path under it
	}
	if !found {
		return "", fmt.Errorf("no instance %q%s", name, didYouMean(name, z.instanceNames("")))
	}
	return z.url(loc)
}

// DryRun reports whether the top-level dry_run is true, resolving only
// dry_run (absent is false; a value that is not a boolean is false, as
// Config.DryRun reads it).
func (z *Lazy) DryRun() (bool, error) {
	if _, ok := z.r.root.vals[KeyDryRun]; !ok {
		return false, nil
	}
	v, err := z.Value(KeyDryRun)
	if err != nil {
		return false, err
	}
	b, _ := asBool(v)
	return b, nil
}
