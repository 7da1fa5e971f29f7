package gymconfig

import (
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
)

// Config is a resolved dict.
type Config struct {
	// Root is the whole resolved tree.
	Root map[string]any
	// Instances are the server instances, in document order.
	Instances []Instance
}

// Instance is one server instance: a top-level key shaped
// {<server type>: {<impl>: {...}}}.
type Instance struct {
	// Name is the top-level key.
	Name string
	// Type is one of contract.ServerTypes(): resources_servers,
	// responses_api_models, responses_api_agents or environment_servers.
	Type string
	// Impl is the one key under the type: the implementation.
	Impl string
	// Block is the resolved implementation block (host and port included
	// when set).
	Block map[string]any
}

// Ref is a reference from one server block to another instance: a block
// field shaped {type: <server type>, name: <instance>}.
type Ref struct {
	// Type is the referenced instance's server type.
	Type string
	// Name is the referenced instance's name.
	Name string
}

// findInstances finds the server instances among the top-level keys (in
// document order) of a resolved tree. A key that has a server-type key but
// breaks the shape rules is an error naming it.
func findInstances(order []string, root map[string]any) ([]Instance, error) {
	var out []Instance
	for _, name := range order {
		if IsReserved(name) {
			continue
		}
		v := root[name]
		typ, err := serverTypeOf(name, v)
		if err != nil {
			return nil, err
		}
		if typ == "" {
			continue
		}
		tv, _ := mappingGet(v, typ)
		impl, err := implOf(name, typ, tv)
		if err != nil {
			return nil, err
		}
		bv, _ := mappingGet(tv, impl)
		if err := checkBlock(name, typ, impl, bv); err != nil {
			return nil, err
		}
		block, _ := bv.(map[string]any)
		if block == nil {
			block = map[string]any{}
		}
		out = append(out, Instance{Name: name, Type: typ, Impl: impl, Block: block})
	}
	return out, nil
}

// The shape rules of a server instance, {<server type>: {<impl>: {...}}},
// below apply to both trees: a mapping is a raw *omap (lazy resolution,
// see Lazy) or a resolved map[string]any (Resolve).

// mappingKeys returns the keys of a mapping of either tree, sorted; ok is
// false when v is not a mapping.
func mappingKeys(v any) (keys []string, ok bool) {
	switch t := v.(type) {
	case *omap:
		return slices.Sorted(slices.Values(t.keys)), true
	case map[string]any:
		return slices.Sorted(maps.Keys(t)), true
	}
	return nil, false
}

// mappingGet returns the value of key k in a mapping of either tree.
func mappingGet(v any, k string) (any, bool) {
	switch t := v.(type) {
	case *omap:
		e, ok := t.vals[k]
		return e, ok
	case map[string]any:
		e, ok := t[k]
		return e, ok
	}
	return nil, false
}

// serverTypeOf returns the server type of the top-level value v of key
// name: "" when v is not a mapping holding a server-type key, an error
// when it holds more than one.
func serverTypeOf(name string, v any) (string, error) {
	var types []string
	for _, t := range contract.ServerTypes() {
		if _, ok := mappingGet(v, t); ok {
			types = append(types, t)
		}
	}
	switch len(types) {
	case 0:
		return "", nil
	case 1:
		return types[0], nil
	}
	return "", fmt.Errorf("instance %q: has %d server types (%s); a server instance has exactly one", name, len(types), strings.Join(types, ", "))
}

// implOf returns the one implementation key of an instance's type-level
// value tv.
func implOf(name, typ string, tv any) (string, error) {
	keys, ok := mappingKeys(tv)
	if !ok || len(keys) != 1 {
		return "", fmt.Errorf("instance %q: %s.%s must be a mapping with exactly one implementation key, got %d%s", name, name, typ, len(keys), listSuffix(keys))
	}
	return keys[0], nil
}

// checkBlock checks that an implementation block is a mapping or null
// (an empty block).
func checkBlock(name, typ, impl string, v any) error {
	if _, ok := mappingKeys(v); ok || v == nil {
		return nil
	}
	return fmt.Errorf("instance %q: %s.%s.%s must be a mapping, got %s", name, name, typ, impl, kindOf(v))
}

func listSuffix(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return " (" + strings.Join(keys, ", ") + ")"
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any, *omap:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	}
	return fmt.Sprintf("%T", v)
}

// Instance returns the instance called name.
func (c *Config) Instance(name string) (Instance, bool) {
	for _, i := range c.Instances {
		if i.Name == name {
			return i, true
		}
	}
	return Instance{}, false
}

func (c *Config) instanceNames() []string {
	names := make([]string, len(c.Instances))
	for i, in := range c.Instances {
		names[i] = in.Name
	}
	return names
}

// Host is the block's host ("" when unset).
func (i Instance) Host() string {
	s, _ := i.Block["host"].(string)
	return s
}

// Port is the block's port (0 when unset or not a number).
func (i Instance) Port() int {
	p, _ := asInt(i.Block["port"])
	return p
}

// Addr is host:port, with DefaultHost for an empty host: a block whose
// host is "" listens on loopback, never on every interface (which must be
// written out, 0.0.0.0).
func (i Instance) Addr() string {
	host := i.Host()
	if host == "" {
		host = DefaultHost
	}
	return net.JoinHostPort(host, strconv.Itoa(i.Port()))
}

// path is the key path of the instance's block.
func (i Instance) path() []string { return []string{i.Name, i.Type, i.Impl} }

// Refs returns the block's fields shaped {type: <server type>, name: <str>}
// (exactly those two keys), by field name.
func (i Instance) Refs() map[string]Ref {
	out := map[string]Ref{}
	for k, v := range i.Block {
		if r, ok := asRef(v); ok {
			out[k] = r
		}
	}
	return out
}

func asRef(v any) (Ref, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 2 {
		return Ref{}, false
	}
	t, ok1 := m["type"].(string)
	n, ok2 := m["name"].(string)
	if !ok1 || !ok2 || !contract.IsServerType(t) {
		return Ref{}, false
	}
	return Ref{Type: t, Name: n}, true
}

// ImplConfig is the block minus the launcher keys (see IsLauncherKey) and
// minus the reference fields (see Refs): what the implementation reads.
func (i Instance) ImplConfig() map[string]any {
	out := map[string]any{}
	for k, v := range i.Block {
		if IsLauncherKey(k) {
			continue
		}
		if _, ok := asRef(v); ok {
			continue
		}
		out[k] = v
	}
	return out
}

// Command returns the block's `command:` argv, nil when absent. It must be
// a non-empty list of strings.
func (i Instance) Command() ([]string, error) {
	v, ok := i.Block[KeyCommand]
	if !ok || v == nil {
		return nil, nil
	}
	where := strings.Join(append(i.path(), KeyCommand), ".")
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return nil, fmt.Errorf("%s: must be a non-empty list of strings (argv), got %s", where, kindOf(v))
	}
	argv := make([]string, len(l))
	for k, e := range l {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%d]: must be a string, got %s", where, k, pyStr(e))
		}
		argv[k] = s
	}
	if argv[0] == "" {
		return nil, fmt.Errorf("%s[0]: the program must not be empty", where)
	}
	return argv, nil
}

// URL is "http://host:port" of the instance called name.
func (c *Config) URL(name string) (string, error) {
	in, ok := c.Instance(name)
	if !ok {
		return "", fmt.Errorf("no instance %q%s", name, didYouMean(name, c.instanceNames()))
	}
	return in.url()
}

// url is "http://host:port" of the block, or an error naming the instance
// when the block has no host or no port.
func (i Instance) url() (string, error) {
	if i.Host() == "" {
		return "", fmt.Errorf("instance %q has no host", i.Name)
	}
	if i.Port() <= 0 {
		return "", fmt.Errorf("instance %q has no port", i.Name)
	}
	return "http://" + i.Addr(), nil
}

// CheckRefs checks that every Ref resolves to an instance of its type.
func (c *Config) CheckRefs() error {
	for _, in := range c.Instances {
		refs := in.Refs()
		for _, field := range slices.Sorted(maps.Keys(refs)) {
			ref := refs[field]
			target, ok := c.Instance(ref.Name)
			if ok && target.Type == ref.Type {
				continue
			}
			var same []string
			for _, o := range c.Instances {
				if o.Type == ref.Type {
					same = append(same, o.Name)
				}
			}
			hint := didYouMean(ref.Name, same)
			if ok {
				hint = fmt.Sprintf(" (%q is a %s)", ref.Name, target.Type)
			}
			return fmt.Errorf("instance %q field %q references %s %q, which is not defined%s", in.Name, field, ref.Type, ref.Name, hint)
		}
	}
	return nil
}

// DryRun reports whether dry_run is true.
func (c *Config) DryRun() bool {
	b, _ := asBool(c.Root[KeyDryRun])
	return b
}

// HeadServer is the head server's address: head_server's host and port,
// defaulting to default_host (or DefaultHost) and DefaultHeadPort. A port
// given as 0 stays 0: any free port, as a listener reads it.
func (c *Config) HeadServer() (host string, port int) {
	host, _ = c.Root[KeyDefaultHost].(string)
	if host == "" {
		host = DefaultHost
	}
	port = DefaultHeadPort
	if m, ok := c.Root[KeyHeadServer].(map[string]any); ok {
		if h, _ := m["host"].(string); h != "" {
			host = h
		}
		if p, ok := asInt(m["port"]); ok && p >= 0 {
			port = p
		}
	}
	return host, port
}

// Redacted returns a deep copy of Root in which every value under a key
// that lens.IsSensitiveKey matches is lens.Redacted (each element of a
// list, each leaf of a mapping; null stays null), and every other string
// has the credentials of the URLs in it scrubbed (ScrubURLs).
func (c *Config) Redacted() map[string]any {
	return redact(c.Root, false).(map[string]any)
}

func redact(v any, secret bool) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = redact(e, secret || lens.IsSensitiveKey(k))
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, e := range t {
			l[i] = redact(e, secret)
		}
		return l
	case nil:
		return nil
	}
	if secret {
		return lens.Redacted
	}
	if s, ok := v.(string); ok {
		return ScrubURLs(s)
	}
	return v
}

// asInt reads an integer value: a YAML integer, an integral float, or a
// decimal string (oc.env gives strings).
func asInt(v any) (int, bool) {
	switch t := v.(type) {
	case int:
		return t, true
	case int64:
		return int(t), true
	case uint64:
		if t <= math.MaxInt32 {
			return int(t), true
		}
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<31 {
			return int(t), true
		}
	case string:
		if i, err := strconv.Atoi(strings.TrimSpace(t)); err == nil {
			return i, true
		}
	}
	return 0, false
}

// asBool reads a boolean value: a YAML boolean or its text.
func asBool(v any) (bool, bool) {
	switch t := v.(type) {
	case bool:
		return t, true
	case string:
		if strings.TrimSpace(t) == "" {
			return false, true // an empty value leaves the switch off
		}
		return contract.BoolWord(t)
	case int:
		return t != 0, true
	}
	return false, false
}

// sortedKeys returns a mapping's keys, sorted.
func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
