// Package registry is the one table of the fleet's built-in server
// implementations: which server type each serves, its configuration type
// and defaults, how it is registered on a server, and the server options
// it needs. `gymlens serve` and the orchestrator both look implementations up
// here, so adding one is one entry.
package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/jsontag"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/live"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
	"github.com/gymlens/gymlens/servers/envserver"
	"github.com/gymlens/gymlens/servers/model"
	"github.com/gymlens/gymlens/servers/resources/arithmetic"
	"github.com/gymlens/gymlens/servers/resources/counter"
	"github.com/gymlens/gymlens/servers/resources/equivalence"
	"github.com/gymlens/gymlens/servers/resources/mcqa"
	"github.com/gymlens/gymlens/servers/resources/stringmatch"
)

// Peers is what only the starter of a server knows: the instance name
// and, for an agent, the base URLs of the servers it calls.
type Peers struct {
	Instance               string
	ModelURL, ResourcesURL string
	// ModelName and ResourcesName are the instance names an agent's
	// model_server and resources_server references name, for its metrics.
	ModelName, ResourcesName string
	// AgentURL and AgentName are, for an environment server, the base
	// URL and instance name of the agent its agent_server reference names.
	AgentURL, AgentName string
	// ObservabilityEnabled is the fleet config's top-level
	// observability_enabled: an agent then sends a rollout's calls under
	// the rollout-id path prefix.
	ObservabilityEnabled bool
}

// Impl is one built-in implementation.
type Impl struct {
	// Name is the implementation's name (--impl, `impl:` in a fleet).
	Name string
	// Type is the server type it serves.
	Type string
	// NewConfig returns a pointer to the implementation's Config holding
	// its defaults, ready to decode a configuration into.
	NewConfig func() any
	// Validate checks a config made by NewConfig and decoded; peers are
	// not yet known, so an agent's URLs are not checked here.
	Validate func(cfg any) error
	// Register validates cfg (a NewConfig value), fills an agent's peer
	// URLs, and registers the implementation's routes on s.
	Register func(s *server.Server, cfg any, peers Peers) error
	// Options returns the server options the implementation needs for
	// the instance (rollout-prefix stripping, the session cookie);
	// the caller adds name, address and limits.
	Options func(instance string) server.Options
}

// Decode decodes a JSON config object (nil or empty means none) into a
// fresh config, starting from the defaults; errors name keys under
// "config" (as in "config.upstream.base_ur"). It is DecodeAt(raw, "config").
func (i Impl) Decode(raw []byte) (any, error) { return i.DecodeAt(raw, "config") }

// DecodeAt decodes a JSON config object (nil or empty means none) into a
// fresh config, starting from the defaults, with errors naming each key
// by its full dotted path under path (for a fleet's server block,
// "<instance>.<type>.<impl>").
//
// A key the implementation's Config does not have is an error naming it
// and the nearest known key, or the known keys when none is near:
//
//	simple_agent.responses_api_agents.simple_agent.max_stpes: unknown key (did you mean "max_steps"?)
//
// Scalars are taken as pydantic's lax mode takes them for upstream's
// servers, since a value from ${oc.env:VAR} is always a string: a JSON
// string is accepted for a boolean field when it is one of 1 0 true false
// t f yes no y n on off (any case), for an integer field when it parses
// as a base-10 integer (surrounding spaces and a ".0" fraction allowed)
// and for a float field when it parses as a finite number. A whole JSON
// number is accepted for an integer field and 0 or 1 for a boolean one.
// A value of the wrong type is an error naming the key and the kind
// wanted; the value itself is shown only for a string that failed to
// parse and only when the key is not sensitive (lens.IsSensitiveKey).
func (i Impl) DecodeAt(raw []byte, path string) (any, error) {
	cfg := i.NewConfig()
	if len(bytes.TrimSpace(raw)) == 0 {
		return cfg, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: more than one JSON value", path)
	}
	if v == nil {
		return cfg, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: want a mapping, got %s", path, jsonKind(v))
	}
	fixed, errs := walk(m, reflect.TypeOf(cfg).Elem(), path, "")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	norm, err := json.Marshal(fixed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := json.Unmarshal(norm, cfg); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			got := te.Value // "number 1.5" for a number: the value itself
			if lens.IsSensitiveKey(te.Field) {
				got, _, _ = strings.Cut(got, " ")
			}
			return nil, fmt.Errorf("%s.%s: want %s, got %s", path, te.Field, kindName(te.Type), got)
		}
		// Other errors (a custom UnmarshalJSON's) may quote a value: only
		// shown when the config holds no sensitive key.
		if hasSensitiveKey(m) {
			return nil, fmt.Errorf("%s: does not decode into the %s configuration", path, i.Name)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// walk checks v, decoded JSON at path, against type t: it reports keys
// no field of a struct accepts (recursing into nested structs, maps and
// lists) and coerces strings and numbers into the scalar kinds of t as
// DecodeAt documents. key is v's own key ("" at the top), for deciding
// whether a value may be shown.
func walk(v any, t reflect.Type, path, key string) (any, []error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// A struct with its own UnmarshalJSON still decodes by its fields (as
	// model.Config does, to start from its defaults); any other type with
	// one decodes its own way and is left alone.
	if v == nil || (t.Kind() != reflect.Struct && reflect.PointerTo(t).Implements(jsonUnmarshaler)) {
		return v, nil
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return v, nil
		}
		fields := map[string]reflect.Type{}
		for _, f := range jsontag.Fields(t) {
			fields[f.Name] = f.Type
		}
		known := make([]string, 0, len(fields))
		for n := range fields {
			known = append(known, n)
		}
		sort.Strings(known)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var errs []error
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				errs = append(errs, unknownKey(path+"."+k, k, known))
				continue
			}
			nv, sub := walk(m[k], ft, path+"."+k, k)
			m[k] = nv
			errs = append(errs, sub...)
		}
		return m, errs
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok || t.Key().Kind() != reflect.String {
			return v, nil
		}
		var errs []error
		for k, e := range m {
			nv, sub := walk(e, t.Elem(), path+"."+k, k)
			m[k] = nv
			errs = append(errs, sub...)
		}
		return m, errs
	case reflect.Slice, reflect.Array:
		l, ok := v.([]any)
		if !ok {
			return v, nil
		}
		var errs []error
		for i, e := range l {
			nv, sub := walk(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), key)
			l[i] = nv
			errs = append(errs, sub...)
		}
		return l, errs
	case reflect.Bool:
		return coerceBool(v, path, key)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return coerceInt(v, path, key, t)
	case reflect.Float32, reflect.Float64:
		return coerceFloat(v, path, key, t)
	}
	return v, nil
}

// hasSensitiveKey reports whether decoded JSON v has a key, at any
// depth, that lens.IsSensitiveKey matches.
func hasSensitiveKey(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if lens.IsSensitiveKey(k) || hasSensitiveKey(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasSensitiveKey(e) {
				return true
			}
		}
	}
	return false
}

// unknownKey is the error of a key no field accepts.
func unknownKey(path, key string, known []string) error {
	switch near := gymconfig.Nearest(key, known); {
	case len(known) == 0:
		return fmt.Errorf("%s: unknown key (this implementation takes no configuration)", path)
	case near != "":
		return fmt.Errorf("%s: unknown key (did you mean %q?)", path, near)
	default:
		return fmt.Errorf("%s: unknown key (known: %s)", path, strings.Join(known, ", "))
	}
}

// badString is the error of a string that does not parse as kind.
func badString(path, key, kind, s string) []error {
	if lens.IsSensitiveKey(key) {
		return []error{fmt.Errorf("%s: want %s, got a string that is not one", path, kind)}
	}
	return []error{fmt.Errorf("%s: want %s, got string %q", path, kind, s)}
}

func coerceBool(v any, path, key string) (any, []error) {
	switch x := v.(type) {
	case string:
		b, ok := protocol.LaxBoolWord(strings.TrimSpace(x))
		if !ok {
			return v, badString(path, key, "a boolean", x)
		}
		return b, nil
	case json.Number:
		switch x.String() {
		case "0":
			return false, nil
		case "1":
			return true, nil
		}
	}
	return v, nil
}

func coerceInt(v any, path, key string, t reflect.Type) (any, []error) {
	kind := kindName(t)
	var s string
	switch x := v.(type) {
	case string:
		s = strings.TrimSpace(x)
		if whole, frac, ok := strings.Cut(s, "."); ok && frac != "" && strings.Trim(frac, "0") == "" {
			s = whole
		}
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			if _, err := strconv.ParseUint(s, 10, 64); err != nil {
				return v, badString(path, key, kind, x)
			}
		}
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return v, nil
		}
		f, err := x.Float64()
		if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return v, nil // encoding/json reports it
		}
		s = strconv.FormatInt(int64(f), 10)
	default:
		return v, nil
	}
	return json.Number(s), nil
}

func coerceFloat(v any, path, key string, t reflect.Type) (any, []error) {
	x, ok := v.(string)
	if !ok {
		return v, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return v, badString(path, key, kindName(t), x)
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
}

// kindName says what kind of JSON value type t takes.
func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return t.String()
}

// jsonKind names the kind of a decoded JSON value.
func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// entry builds an Impl from an implementation package's typed functions.
func entry[C any](typ, name string, defaults func() C, validate func(C) error,
	register func(*server.Server, C, Peers) error, options func(string) server.Options) Impl {
	return Impl{
		Name: name, Type: typ,
		NewConfig: func() any { c := defaults(); return &c },
		Validate: func(cfg any) error {
			if validate == nil {
				return nil
			}
			return validate(*cfg.(*C))
		},
		Register: func(s *server.Server, cfg any, p Peers) error { return register(s, *cfg.(*C), p) },
		Options:  options,
	}
}

// environmentEntry builds the row of a built-in environment, a resources
// server built on the environment SDK, from its package's name,
// configuration defaults and constructor: the configuration's own
// Validate checks it, registering builds the environment with newEnv and
// puts its routes on the server, and the server options are the
// environment's (environment.ServerOptions: rollout-prefix stripping and
// the session cookie named for name and the instance).
func environmentEntry[C interface{ Validate() error }](name string, defaults func() C,
	newEnv func(C) (*environment.Environment, error)) Impl {
	return entry(contract.ServerTypeResources, name, defaults, C.Validate,
		func(s *server.Server, c C, _ Peers) error {
			env, err := newEnv(c)
			if err != nil {
				return err
			}
			env.Register(s)
			return nil
		},
		func(instance string) server.Options { return environment.ServerOptions(name, instance) })
}

// impls lists every built-in implementation; the first of each type is
// that type's default.
var impls = []Impl{
	environmentEntry(arithmetic.ServerName, arithmetic.Defaults, arithmetic.New),
	environmentEntry(stringmatch.ServerName, stringmatch.Defaults, stringmatch.New),
	environmentEntry(mcqa.ServerName, mcqa.Defaults, mcqa.New),
	environmentEntry(equivalence.ServerName, equivalence.Defaults, equivalence.New),
	environmentEntry(counter.ServerName, counter.Defaults, counter.New),
	entry(contract.ServerTypeModel, model.ServerName, model.Defaults, model.Config.Validate,
		func(s *server.Server, c model.Config, p Peers) error {
			if c.Name == "" {
				c.Name = p.Instance
			}
			return model.Register(s, c)
		}, model.ServerOptions),
	entry(contract.ServerTypeAgent, agent.ServerName, agent.Defaults, nil,
		func(s *server.Server, c agent.Config, p Peers) error {
			if p.ModelURL != "" {
				c.ModelURL = p.ModelURL
			}
			if p.ResourcesURL != "" {
				c.ResourcesURL = p.ResourcesURL
			}
			c.ModelServerName, c.ResourcesServerName = p.ModelName, p.ResourcesName
			// Its episodes route is named for the instance and asks for the
			// fleet's head token, which the orchestrator hands its servers.
			c.Instance, c.HeadToken = p.Instance, os.Getenv(contract.EnvHeadToken)
			on, err := live.Enabled(os.LookupEnv)
			if err != nil {
				return err
			}
			c.NoLive = !on
			c.ObservabilityEnabled = c.ObservabilityEnabled || p.ObservabilityEnabled
			return agent.Register(s, c, server.NewClient(server.ClientOptions{}))
		}, agent.ServerOptions),
	entry(contract.ServerTypeEnvironment, envserver.ServerName, envserver.Defaults, envserver.Config.Validate,
		func(s *server.Server, c envserver.Config, p Peers) error {
			c.AgentURL, c.AgentName, c.Instance = p.AgentURL, p.AgentName, p.Instance
			return envserver.Register(s, c, envserver.NewClient())
		}, envserver.ServerOptions),
}

// Lookup returns the implementation name of server type typ.
func Lookup(typ, name string) (Impl, bool) {
	for _, i := range impls {
		if i.Type == typ && i.Name == name {
			return i, true
		}
	}
	return Impl{}, false
}

// ByName returns the implementation called name, whatever its type.
func ByName(name string) (Impl, bool) {
	for _, i := range impls {
		if i.Name == name {
			return i, true
		}
	}
	return Impl{}, false
}

// Default returns the default implementation of server type typ, or ""
// for an unknown type.
func Default(typ string) string {
	for _, i := range impls {
		if i.Type == typ {
			return i.Name
		}
	}
	return ""
}

// Names returns the implementations of server type typ, default first.
func Names(typ string) []string {
	var out []string
	for _, i := range impls {
		if i.Type == typ {
			out = append(out, i.Name)
		}
	}
	return out
}
