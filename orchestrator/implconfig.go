package orchestrator

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/gymlens/gymlens/servers/agent"
	"github.com/gymlens/gymlens/servers/model"
	"github.com/gymlens/gymlens/servers/resources"
)

// checkImplConfig decodes a server's `config:` into its implementation's
// Config, so a typo in a key or a bad value is reported before anything is
// spawned rather than as a child that fails (or, worse, silently ignores
// the key).
func checkImplConfig(s ServerSpec) error {
	if len(s.Config) == 0 {
		return nil
	}
	raw, err := json.Marshal(s.Config)
	if err != nil {
		return err
	}
	var target any
	validate := func() error { return nil }
	switch s.Impl {
	case ImplArithmetic:
		c := resources.Defaults()
		target, validate = &c, func() error { return c.Validate() }
	case ImplPolicyModel:
		c := model.Defaults()
		target, validate = &c, func() error { return c.Validate() }
	case ImplSimpleAgent:
		// Its URLs are filled in at spawn time; only the keys are checked.
		c := agent.Defaults()
		target = &c
	default:
		return nil
	}
	if err := unknownKeys(s.Config, reflect.TypeOf(target).Elem(), "config"); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, target); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
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
			errs = append(errs, fmt.Errorf("%s: unknown key %q (known: %s)", path, k, strings.Join(known, ", ")))
			continue
		}
		if sub, isMap := m[k].(map[string]any); isMap && ft.Kind() == reflect.Struct {
			errs = append(errs, unknownKeys(sub, ft, path+"."+k))
		}
	}
	return errors.Join(errs...)
}
