package gymconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

const (
	// maxInterpDepth bounds how deeply interpolations may chain or nest.
	maxInterpDepth = 64
	// maxSteps bounds the values visited by one Resolve.
	maxSteps = 1 << 20
	// missing is OmegaConf's mandatory-missing marker.
	missing = "???"
)

var errTooLarge = fmt.Errorf("config too large to resolve (more than %d values once interpolated)", maxSteps)

// errMissing is the error of a ??? value that is resolved.
var errMissing = errors.New("missing mandatory value (???)")

// knownResolvers are the resolvers ${name:...} understands.
var knownResolvers = []string{"oc.env"}

// seg is one step of a key path: a mapping key, or a list index (idx >= 0).
type seg struct {
	key string
	idx int
}

type keyPath []seg

func (p keyPath) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.idx >= 0:
			fmt.Fprintf(&b, "[%d]", s.idx)
		case i > 0:
			b.WriteByte('.')
			b.WriteString(s.key)
		default:
			b.WriteString(s.key)
		}
	}
	return b.String()
}

func (p keyPath) id() string {
	var b strings.Builder
	for _, s := range p {
		if s.idx >= 0 {
			fmt.Fprintf(&b, "\x01%d", s.idx)
		} else {
			b.WriteString("\x00" + s.key)
		}
	}
	return b.String()
}

func (p keyPath) with(s seg) keyPath {
	out := make(keyPath, len(p), len(p)+1)
	copy(out, p)
	return append(out, s)
}

// pathError is an error at one value of the tree.
type pathError struct {
	path string
	expr string // the interpolation, when there is one
	err  error
}

func (e *pathError) Error() string {
	if e.expr != "" {
		return e.path + ": " + e.expr + ": " + e.err.Error()
	}
	return e.path + ": " + e.err.Error()
}

func (e *pathError) Unwrap() error { return e.err }

type resolver struct {
	root   *omap
	env    func(string) (string, bool)
	done   map[string]any // resolved strings by path id
	active map[string]bool
	stack  []string // paths being resolved, for cycle messages
	depth  int
	steps  int
}

// Resolve resolves every interpolation, with lookupEnv answering oc.env
// (nil means os.LookupEnv), and finds the server instances.
//
//   - ${a.b.c} is an absolute dotted path (a list element is a.0 or a[0]);
//     ${.x} is a sibling of the value, each further dot one level up
//     (OmegaConf's rules).
//   - ${oc.env:VAR} is the variable's value (unset is an error);
//     ${oc.env:VAR,default} falls back to default, which may itself hold
//     ${...}. oc.env gives strings, as OmegaConf does; a default of null
//     gives null.
//   - A value that is exactly one interpolation keeps the referenced
//     value's type; interpolations inside a longer string give a string
//     (null, booleans and floats printed as Python prints them, containers
//     as JSON).
//   - \${ is a literal "${"; a value ??? anywhere is a missing-value error;
//     reference cycles and unknown resolvers (${foo:...}) are errors.
//
// Errors name the key path where they happened, e.g.
// `policy_model.responses_api_models.openai_model.openai_api_key: ${policy_api_kye}: no key "policy_api_kye" (did you mean "policy_api_key"?)`.
//
// Resolve is strict: any value that does not resolve fails it. Dict.Lazy
// resolves with the same rules only what is read.
func (d *Dict) Resolve(lookupEnv func(string) (string, bool)) (*Config, error) {
	r := newResolver(d, lookupEnv)
	if err := checkMissing(r.root); err != nil {
		return nil, err
	}
	v, err := r.value(nil, r.root)
	if err != nil {
		return nil, err
	}
	cfg := &Config{Root: v.(map[string]any)}
	if cfg.Instances, err = findInstances(r.root.keys, cfg.Root); err != nil {
		return nil, err
	}
	return cfg, nil
}

// newResolver is a resolver of a snapshot of d's raw tree; lookupEnv nil
// means os.LookupEnv.
func newResolver(d *Dict, lookupEnv func(string) (string, bool)) *resolver {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	root, _ := toRaw(d.root).(*omap)
	if root == nil {
		root = &omap{vals: map[string]any{}}
	}
	return &resolver{root: root, env: lookupEnv, done: map[string]any{}, active: map[string]bool{}}
}

// checkMissing reports every ??? value, in document order.
func checkMissing(root *omap) error {
	var msgs []string
	var walk func(p keyPath, v any)
	walk = func(p keyPath, v any) {
		if len(msgs) >= 20 {
			return
		}
		switch t := v.(type) {
		case string:
			if t == missing {
				msgs = append(msgs, p.String()+": "+errMissing.Error())
			}
		case *omap:
			for _, k := range t.keys {
				walk(p.with(seg{key: k, idx: -1}), t.vals[k])
			}
		case []any:
			for i, e := range t {
				walk(p.with(seg{idx: i}), e)
			}
		}
	}
	walk(nil, root)
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

// value resolves the raw value v found at p.
func (r *resolver) value(p keyPath, v any) (any, error) {
	r.steps++
	if r.steps > maxSteps {
		return nil, errTooLarge
	}
	switch t := v.(type) {
	case string:
		id := p.id()
		if done, ok := r.done[id]; ok {
			return r.copy(done)
		}
		if r.active[id] {
			return nil, fmt.Errorf("reference cycle: %s -> %s", strings.Join(r.stack, " -> "), p)
		}
		if t == missing {
			// Resolve reports every ??? first (checkMissing); a lazy
			// resolution meets only those it reaches.
			return nil, &pathError{path: p.String(), err: errMissing}
		}
		if !strings.Contains(t, "${") {
			out := unescapeTop(t)
			r.done[id] = out
			return out, nil
		}
		if r.depth >= maxInterpDepth {
			return nil, &pathError{path: p.String(), err: fmt.Errorf("interpolations nested deeper than %d levels", maxInterpDepth)}
		}
		r.active[id] = true
		r.stack = append(r.stack, p.String())
		r.depth++
		out, err := r.template(p, t, true)
		r.depth--
		r.stack = r.stack[:len(r.stack)-1]
		delete(r.active, id)
		if err != nil {
			return nil, err
		}
		r.done[id] = out
		return r.copy(out)
	case *omap:
		m := make(map[string]any, len(t.keys))
		for _, k := range t.keys {
			c, err := r.value(p.with(seg{key: k, idx: -1}), t.vals[k])
			if err != nil {
				return nil, err
			}
			m[k] = c
		}
		return m, nil
	case []any:
		l := make([]any, len(t))
		for i, e := range t {
			c, err := r.value(p.with(seg{idx: i}), e)
			if err != nil {
				return nil, err
			}
			l[i] = c
		}
		return l, nil
	}
	return v, nil
}

// piece is a literal or an interpolation of a template string.
type piece struct {
	lit    string
	interp string // the body between ${ and }
	raw    string // the whole ${...}
	isExpr bool
}

// unescapeTop applies the top-level escapes of a string with no
// interpolation: \${ is "${".
func unescapeTop(s string) string {
	if !strings.Contains(s, `\${`) {
		return s
	}
	ps, err := splitTemplate(s)
	if err != nil {
		return s
	}
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.lit)
	}
	return b.String()
}

// splitTemplate cuts s into literals and ${...} interpolations.
func splitTemplate(s string) ([]piece, error) {
	var out []piece
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, piece{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], `\\${`):
			lit.WriteByte('\\')
			i += 2
		case strings.HasPrefix(s[i:], `\${`):
			lit.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end, err := matchClose(s, i+2)
			if err != nil {
				return nil, err
			}
			flush()
			out = append(out, piece{interp: s[i+2 : end], raw: s[i : end+1], isExpr: true})
			i = end + 1
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	flush()
	return out, nil
}

// matchClose returns the index of the } closing the interpolation whose
// body starts at start.
func matchClose(s string, start int) (int, error) {
	depth := 0
	var quote byte
	for k := start; k < len(s); k++ {
		c := s[k]
		switch {
		case c == '\\':
			k++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '{':
			depth++
		case c == '}':
			if depth == 0 {
				return k, nil
			}
			depth--
		}
	}
	return 0, fmt.Errorf("unclosed interpolation %q", s[start-2:])
}

// template evaluates a string that may hold interpolations. typed keeps
// the type of a string that is exactly one interpolation.
func (r *resolver) template(p keyPath, s string, typed bool) (any, error) {
	ps, err := splitTemplate(s)
	if err != nil {
		return nil, &pathError{path: p.String(), err: err}
	}
	if typed && len(ps) == 1 && ps[0].isExpr {
		return r.interp(p, ps[0])
	}
	var b strings.Builder
	for _, pc := range ps {
		if !pc.isExpr {
			b.WriteString(pc.lit)
			continue
		}
		v, err := r.interp(p, pc)
		if err != nil {
			return nil, err
		}
		b.WriteString(pyStr(v))
	}
	return b.String(), nil
}

// interp evaluates one ${...} for the value at p.
func (r *resolver) interp(p keyPath, pc piece) (any, error) {
	v, err := r.evalBody(p, strings.TrimSpace(pc.interp))
	if err != nil {
		var pe *pathError
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, &pathError{path: p.String(), expr: pc.raw, err: err}
	}
	return v, nil
}

func (r *resolver) evalBody(p keyPath, body string) (any, error) {
	if c := topLevelIndex(body, ':'); c >= 0 {
		name := strings.TrimSpace(body[:c])
		switch name {
		case "oc.env":
			return r.ocEnv(p, body[c+1:])
		}
		return nil, fmt.Errorf("unknown resolver %q%s", name, didYouMean(name, knownResolvers))
	}
	key := body
	if strings.Contains(key, "${") {
		k, err := r.template(p, key, false)
		if err != nil {
			return nil, err
		}
		key = strings.TrimSpace(k.(string))
	}
	return r.ref(p, key)
}

// topLevelIndex finds c in s outside quotes and nested braces, or -1.
func topLevelIndex(s string, c byte) int {
	depth := 0
	var quote byte
	for k := 0; k < len(s); k++ {
		ch := s[k]
		switch {
		case ch == '\\':
			k++
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '{' || ch == '[' || ch == '(':
			depth++
		case ch == '}' || ch == ']' || ch == ')':
			depth--
		case ch == c && depth == 0:
			return k
		}
	}
	return -1
}

// ref resolves a key reference (absolute, or relative with leading dots)
// made by the value at p.
func (r *resolver) ref(p keyPath, key string) (any, error) {
	if key == "" {
		return nil, errors.New("empty interpolation")
	}
	var base keyPath
	rest := key
	if strings.HasPrefix(key, ".") {
		dots := len(key) - len(strings.TrimLeft(key, "."))
		rest = key[dots:]
		up := len(p) - dots
		if up < 0 {
			return nil, fmt.Errorf("relative interpolation %q goes above the top level", key)
		}
		base = p[:up]
	}
	keys, err := splitKey(rest)
	if err != nil {
		return nil, err
	}
	return r.lookup(base, keys)
}

// lookup resolves the value at base (a path of existing raw containers)
// followed by keys, resolving what it walks through only as far as it
// must: an interpolation on the way is resolved, the rest of the tree is
// not.
func (r *resolver) lookup(base keyPath, keys []string) (any, error) {
	// Walk the base (the ancestors of p: raw containers that exist).
	var cur any = r.root
	for _, s := range base {
		switch t := cur.(type) {
		case *omap:
			cur = t.vals[s.key]
		case []any:
			cur = t[s.idx]
		}
	}
	full := slices.Clone(base)
	resolved := false
	for _, k := range keys {
		if s, ok := cur.(string); ok && !resolved {
			v, err := r.value(full, s)
			if err != nil {
				return nil, err
			}
			cur, resolved = v, true
		}
		switch t := cur.(type) {
		case *omap:
			v, ok := t.vals[k]
			if !ok {
				return nil, noKey(full, k, t.keys)
			}
			cur, full = v, full.with(seg{key: k, idx: -1})
		case map[string]any:
			v, ok := t[k]
			if !ok {
				known := make([]string, 0, len(t))
				for mk := range t {
					known = append(known, mk)
				}
				sort.Strings(known)
				return nil, noKey(full, k, known)
			}
			cur, full = v, full.with(seg{key: k, idx: -1})
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(t) {
				return nil, fmt.Errorf("no element %q in list %q (%d elements)", k, full.String(), len(t))
			}
			cur, full = t[i], full.with(seg{idx: i})
		default:
			if len(full) == 0 {
				return nil, fmt.Errorf("no key %q", k)
			}
			return nil, fmt.Errorf("no key %q: %q is not a mapping", full.with(seg{key: k, idx: -1}).String(), full.String())
		}
	}
	if resolved {
		return cur, nil
	}
	return r.value(full, cur)
}

func noKey(at keyPath, k string, known []string) error {
	name := at.with(seg{key: k, idx: -1}).String()
	hint := ""
	if n := Nearest(k, known); n != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", at.with(seg{key: n, idx: -1}).String())
	}
	return fmt.Errorf("no key %q%s", name, hint)
}

// splitKey splits a dotted key with optional [n] list indices.
func splitKey(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for part := range strings.SplitSeq(s, ".") {
		for {
			open := strings.IndexByte(part, '[')
			if open < 0 {
				break
			}
			closeAt := strings.IndexByte(part, ']')
			if closeAt < open {
				return nil, fmt.Errorf("malformed key %q", s)
			}
			if open > 0 {
				out = append(out, part[:open])
			}
			out = append(out, part[open+1:closeAt])
			part = part[closeAt+1:]
		}
		if part != "" {
			out = append(out, part)
		}
	}
	for _, k := range out {
		if k == "" {
			return nil, fmt.Errorf("malformed key %q", s)
		}
	}
	return out, nil
}

// ocEnv is ${oc.env:VAR} and ${oc.env:VAR,default}.
func (r *resolver) ocEnv(p keyPath, args string) (any, error) {
	parts := splitArgs(args)
	if len(parts) < 1 || len(parts) > 2 || strings.TrimSpace(parts[0]) == "" {
		return nil, fmt.Errorf("oc.env takes a variable name and an optional default, got %d arguments", len(parts))
	}
	nameV, err := r.arg(p, parts[0])
	if err != nil {
		return nil, err
	}
	name, ok := nameV.(string)
	if !ok || name == "" {
		return nil, fmt.Errorf("oc.env: the variable name must be a string, got %s", pyStr(nameV))
	}
	if v, ok := r.env(name); ok {
		return v, nil
	}
	if len(parts) == 1 {
		return nil, fmt.Errorf("oc.env: environment variable %q is not set", name)
	}
	def, err := r.arg(p, parts[1])
	if err != nil {
		return nil, err
	}
	if def == nil {
		return nil, nil
	}
	return pyStr(def), nil
}

// splitArgs splits resolver arguments at top-level commas.
func splitArgs(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var out []string
	for {
		i := topLevelIndex(s, ',')
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
}

// arg evaluates one resolver argument: a quoted string, an interpolation,
// a primitive (null, a boolean, a number) or unquoted text.
func (r *resolver) arg(p keyPath, a string) (any, error) {
	a = strings.TrimSpace(a)
	if len(a) >= 2 && (a[0] == '\'' || a[0] == '"') && a[len(a)-1] == a[0] {
		inner := unescapeArg(a[1 : len(a)-1])
		return r.template(p, inner, false)
	}
	if strings.Contains(a, "${") {
		return r.template(p, unescapeArg(a), true)
	}
	switch strings.ToLower(a) {
	case "null":
		return nil, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	if i, err := strconv.ParseInt(strings.ReplaceAll(a, "_", ""), 10, 64); err == nil && a != "" {
		return int(i), nil
	}
	if f, err := strconv.ParseFloat(a, 64); err == nil && !strings.ContainsAny(a, "xXpP_") {
		return f, nil
	}
	return unescapeArg(a), nil
}

// unescapeArg drops the backslash of escaped argument characters; \${
// stays escaped so that template keeps it literal.
func unescapeArg(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			n := s[i+1]
			if n == '$' {
				b.WriteByte('\\')
				continue
			}
			if strings.IndexByte(`\,:=[](){}'" `, n) >= 0 {
				b.WriteByte(n)
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// pyStr formats a value as Python's str() would in OmegaConf's string
// interpolation; containers are JSON.
func pyStr(v any) string {
	switch t := v.(type) {
	case nil:
		return "None"
	case string:
		return t
	case bool:
		if t {
			return "True"
		}
		return "False"
	case float64:
		switch {
		case math.IsInf(t, 1):
			return "inf"
		case math.IsInf(t, -1):
			return "-inf"
		case math.IsNaN(t):
			return "nan"
		}
		s := strconv.FormatFloat(t, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return s
	case map[string]any, []any:
		b, err := json.Marshal(t)
		if err != nil {
			return fmt.Sprint(t)
		}
		return string(b)
	}
	return fmt.Sprint(v)
}

// copy copies resolved containers, so that no two places of the resolved
// tree share a map or a slice; copies count against the step budget, which
// bounds documents whose interpolations multiply (x1: [${x0}, ${x0}], ...).
func (r *resolver) copy(v any) (any, error) {
	r.steps++
	if r.steps > maxSteps {
		return nil, errTooLarge
	}
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			c, err := r.copy(e)
			if err != nil {
				return nil, err
			}
			m[k] = c
		}
		return m, nil
	case []any:
		l := make([]any, len(t))
		for i, e := range t {
			c, err := r.copy(e)
			if err != nil {
				return nil, err
			}
			l[i] = c
		}
		return l, nil
	}
	return v, nil
}
