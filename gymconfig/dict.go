package gymconfig

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// maxNodes bounds the size of a document once its aliases are expanded.
const maxNodes = 1 << 17

// Dict is a parsed, unresolved config dict: a YAML node tree whose key
// order is kept. Aliases and merge keys (<<) are expanded by Parse, so
// every value has exactly one place in the tree.
type Dict struct {
	root *yaml.Node // a mapping node
}

// Parse reads a config dict. A YAML error keeps yaml's "line N"; the top
// level must be a mapping (an empty document is an empty dict); duplicate
// keys are errors.
func Parse(doc []byte) (*Dict, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(doc, &n); err != nil {
		return nil, fmt.Errorf("parse config YAML: %w", err)
	}
	if n.Kind == 0 {
		return &Dict{root: newMapping()}, nil
	}
	top := &n
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	if top.Kind == yaml.ScalarNode && top.ShortTag() == "!!null" {
		return &Dict{root: newMapping()}, nil
	}
	if deref(top).Kind != yaml.MappingNode {
		return nil, fmt.Errorf("parse config YAML: line %d: the top level must be a mapping", top.Line)
	}
	// Decoding into a generic value applies yaml's own checks: duplicate
	// keys (with both lines) and excessive aliasing.
	var probe any
	if err := n.Decode(&probe); err != nil {
		return nil, fmt.Errorf("parse config YAML: %w", err)
	}
	budget := maxNodes
	root, err := expand(top, &budget, 0)
	if err != nil {
		return nil, fmt.Errorf("parse config YAML: %w", err)
	}
	return &Dict{root: root}, nil
}

func newMapping() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"} }

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 1000; i++ {
		n = n.Alias
	}
	return n
}

// expand copies n with aliases replaced by copies of their targets and
// merge keys applied, so the copy has no sharing.
func expand(n *yaml.Node, budget *int, depth int) (*yaml.Node, error) {
	*budget--
	if *budget < 0 {
		return nil, errors.New("document too large once its aliases are expanded")
	}
	if depth > 10000 {
		return nil, errors.New("document nested too deeply")
	}
	n = deref(n)
	out := *n
	out.Anchor = ""
	out.Content = nil
	if n.Kind == yaml.ScalarNode {
		// Pin the resolved tag: an implicit value (such as the empty null of
		// "{a}") must keep its meaning when encoded again.
		out.Tag = n.ShortTag()
		if out.Tag == "!!null" && n.Style == 0 {
			out.Value = "null"
		}
	}
	switch n.Kind {
	case yaml.AliasNode:
		return nil, fmt.Errorf("line %d: unresolvable alias", n.Line)
	case yaml.SequenceNode:
		out.Content = make([]*yaml.Node, 0, len(n.Content))
		for _, c := range n.Content {
			e, err := expand(c, budget, depth+1)
			if err != nil {
				return nil, err
			}
			out.Content = append(out.Content, e)
		}
	case yaml.MappingNode:
		seen := map[string]int{} // key -> index of its value in out.Content
		explicit := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := deref(n.Content[i]); k.Kind == yaml.ScalarNode && k.ShortTag() != "!!merge" {
				explicit[k.Value] = true
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := deref(n.Content[i]), n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: keys must be plain values", k.Line)
			}
			if k.ShortTag() == "!!merge" {
				if err := mergeInto(&out, v, seen, explicit, budget, depth); err != nil {
					return nil, err
				}
				continue
			}
			if _, dup := seen[k.Value]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %q", k.Line, k.Value)
			}
			ev, err := expand(v, budget, depth+1)
			if err != nil {
				return nil, err
			}
			kc := *k
			kc.Anchor = ""
			seen[k.Value] = len(out.Content) + 1
			out.Content = append(out.Content, &kc, ev)
		}
	}
	return &out, nil
}

// mergeInto applies a merge key's value (a mapping or a list of mappings)
// to out: keys given explicitly, or by an earlier merge, win.
func mergeInto(out *yaml.Node, v *yaml.Node, seen map[string]int, explicit map[string]bool, budget *int, depth int) error {
	v = deref(v)
	var sources []*yaml.Node
	switch v.Kind {
	case yaml.MappingNode:
		sources = []*yaml.Node{v}
	case yaml.SequenceNode:
		for _, s := range v.Content {
			sources = append(sources, deref(s))
		}
	}
	for _, s := range sources {
		if s.Kind != yaml.MappingNode {
			return fmt.Errorf("line %d: a merge key (<<) needs a mapping or a list of mappings", s.Line)
		}
		m, err := expand(s, budget, depth+1)
		if err != nil {
			return err
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			key := m.Content[i].Value
			if explicit[key] {
				continue
			}
			if _, ok := seen[key]; ok {
				continue
			}
			seen[key] = len(out.Content) + 1
			out.Content = append(out.Content, m.Content[i], m.Content[i+1])
		}
	}
	return nil
}

// YAML returns the dict as YAML, interpolations still unresolved.
func (d *Dict) YAML() []byte {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(d.root); err != nil {
		// A tree built by Parse and Set always encodes; keep the contract
		// error-free but never return an empty document silently.
		return []byte(fmt.Sprintf("# gymconfig: encode: %v\n{}\n", err))
	}
	_ = enc.Close()
	return buf.Bytes()
}

// child returns the value node of key in mapping m, or nil.
func child(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// node walks path from the root; parent is the container of the last step.
func (d *Dict) node(path []string) *yaml.Node {
	n := d.root
	for _, p := range path {
		switch n.Kind {
		case yaml.MappingNode:
			n = child(n, p)
		case yaml.SequenceNode:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(n.Content) {
				return nil
			}
			n = n.Content[i]
		default:
			return nil
		}
		if n == nil {
			return nil
		}
	}
	return n
}

// Set sets the value at path, creating mappings on the way. v is a Go
// scalar, map or slice (anything yaml can encode). A list element is
// addressed by its decimal index, which must exist.
func (d *Dict) Set(path []string, v any) error {
	if len(path) == 0 {
		return errors.New("set: empty key path")
	}
	var val yaml.Node
	if err := val.Encode(v); err != nil {
		return fmt.Errorf("set %s: %w", dotted(path), err)
	}
	n := d.root
	for i, p := range path {
		last := i == len(path)-1
		switch n.Kind {
		case yaml.MappingNode:
			c := child(n, p)
			if last {
				if c != nil {
					*c = val
				} else {
					n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: p}, &val)
				}
				return nil
			}
			if c == nil || (c.Kind == yaml.ScalarNode && c.ShortTag() == "!!null") {
				m := newMapping()
				if c != nil {
					*c = *m
					m = c
				} else {
					n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: p}, m)
				}
				c = m
			}
			n = c
		case yaml.SequenceNode:
			idx, err := strconv.Atoi(p)
			if err != nil || idx < 0 || idx >= len(n.Content) {
				return fmt.Errorf("set %s: %s is a list without element %q", dotted(path), dotted(path[:i]), p)
			}
			if last {
				*n.Content[idx] = val
				return nil
			}
			n = n.Content[idx]
		default:
			return fmt.Errorf("set %s: %s is not a mapping", dotted(path), dotted(path[:i]))
		}
	}
	return nil
}

// Get returns the unresolved value at path as Go data (map[string]any,
// []any, scalars); an empty path is the whole dict.
func (d *Dict) Get(path []string) (any, bool) {
	n := d.node(path)
	if n == nil {
		return nil, false
	}
	return toPlain(toRaw(n)), true
}

// Delete removes the value at path; a missing path is not an error.
func (d *Dict) Delete(path []string) {
	if len(path) == 0 {
		return
	}
	parent := d.node(path[:len(path)-1])
	if parent == nil {
		return
	}
	key := path[len(path)-1]
	switch parent.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(parent.Content); i += 2 {
			if parent.Content[i].Value == key {
				parent.Content = append(parent.Content[:i:i], parent.Content[i+2:]...)
				return
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(parent.Content) {
			parent.Content = append(parent.Content[:i:i], parent.Content[i+1:]...)
		}
	}
}

// omap is a mapping of the raw (unresolved) tree, in document order.
type omap struct {
	keys []string
	vals map[string]any
}

// toRaw converts an expanded node tree to the raw tree: *omap, []any and
// scalars.
func toRaw(n *yaml.Node) any {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return toRaw(n.Content[0])
	case yaml.MappingNode:
		m := &omap{vals: make(map[string]any, len(n.Content)/2)}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if _, dup := m.vals[k]; !dup {
				m.keys = append(m.keys, k)
			}
			m.vals[k] = toRaw(n.Content[i+1])
		}
		return m
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		for i, c := range n.Content {
			l[i] = toRaw(c)
		}
		return l
	case yaml.AliasNode:
		if n.Alias != nil {
			return toRaw(n.Alias)
		}
		return nil
	}
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool", "!!int", "!!float", "!!binary":
		var v any
		if err := n.Decode(&v); err == nil {
			return v
		}
	}
	return n.Value
}

// toPlain converts a raw tree to plain Go data.
func toPlain(v any) any {
	switch t := v.(type) {
	case *omap:
		m := make(map[string]any, len(t.keys))
		for _, k := range t.keys {
			m[k] = toPlain(t.vals[k])
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, e := range t {
			l[i] = toPlain(e)
		}
		return l
	}
	return v
}

func dotted(path []string) string {
	var b bytes.Buffer
	for i, p := range path {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}
