// Package registry is the one table of the fleet's built-in server
// implementations: which server type each serves, its configuration type
// and defaults, how it is registered on a server, and the server options
// it needs. `gym serve` and the orchestrator both look implementations up
// here, so adding one is one entry.
package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/agent"
	"github.com/gymlens/gymlens/servers/model"
	"github.com/gymlens/gymlens/servers/resources"
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
// fresh config, starting from the defaults. A key the implementation's
// Config does not have is an error naming it and the known keys, so a
// typo is reported instead of silently ignored.
func (i Impl) Decode(raw []byte) (any, error) {
	cfg := i.NewConfig()
	if len(raw) == 0 {
		return cfg, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := unknownKeys(m, reflect.TypeOf(cfg).Elem(), "config"); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, cfg); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}

// unknownKeys reports keys of m that no JSON field of struct type t
// accepts, recursing into nested structs.
func unknownKeys(m map[string]any, t reflect.Type, path string) error {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	var errs []error
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ft, ok := fields[k]
		if !ok {
			known := make([]string, 0, len(fields))
			for n := range fields {
				known = append(known, n)
			}
			sort.Strings(known)
			if len(known) == 0 {
				errs = append(errs, fmt.Errorf("%s: unknown key %q (this implementation takes no configuration)", path, k))
			} else {
				errs = append(errs, fmt.Errorf("%s: unknown key %q (known: %s)", path, k, strings.Join(known, ", ")))
			}
			continue
		}
		if sub, isMap := m[k].(map[string]any); isMap && ft.Kind() == reflect.Struct {
			errs = append(errs, unknownKeys(sub, ft, path+"."+k))
		}
	}
	return errors.Join(errs...)
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

// impls lists every built-in implementation; the first of each type is
// that type's default.
var impls = []Impl{
	entry(protocol.ServerTypeResources, resources.ServerName, resources.Defaults, resources.Config.Validate,
		func(s *server.Server, c resources.Config, _ Peers) error { return resources.Register(s, c) }, resources.ServerOptions),
	entry(protocol.ServerTypeResources, stringmatch.ServerName, stringmatch.Defaults, stringmatch.Config.Validate,
		func(s *server.Server, c stringmatch.Config, _ Peers) error { return stringmatch.Register(s, c) }, stringmatch.ServerOptions),
	entry(protocol.ServerTypeResources, mcqa.ServerName, mcqa.Defaults, mcqa.Config.Validate,
		func(s *server.Server, c mcqa.Config, _ Peers) error { return mcqa.Register(s, c) }, mcqa.ServerOptions),
	entry(protocol.ServerTypeResources, equivalence.ServerName, equivalence.Defaults, equivalence.Config.Validate,
		func(s *server.Server, c equivalence.Config, _ Peers) error { return equivalence.Register(s, c) }, equivalence.ServerOptions),
	entry(protocol.ServerTypeResources, counter.ServerName, counter.Defaults, counter.Config.Validate,
		func(s *server.Server, c counter.Config, _ Peers) error { return counter.Register(s, c) }, counter.ServerOptions),
	entry(protocol.ServerTypeModel, model.ServerName, model.Defaults, model.Config.Validate,
		func(s *server.Server, c model.Config, p Peers) error {
			if c.Name == "" {
				c.Name = p.Instance
			}
			return model.Register(s, c)
		}, model.ServerOptions),
	entry(protocol.ServerTypeAgent, agent.ServerName, agent.Defaults, nil,
		func(s *server.Server, c agent.Config, p Peers) error {
			if p.ModelURL != "" {
				c.ModelURL = p.ModelURL
			}
			if p.ResourcesURL != "" {
				c.ResourcesURL = p.ResourcesURL
			}
			return agent.Register(s, c, server.NewClient(server.ClientOptions{}))
		}, agent.ServerOptions),
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

// Types returns the server types, in a fixed order.
func Types() []string {
	var out []string
	for _, i := range impls {
		if !slices.Contains(out, i.Type) {
			out = append(out, i.Type)
		}
	}
	return out
}
