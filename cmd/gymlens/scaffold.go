package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/servers/registry"
)

// EnvGymBinary overrides, at launch, the gymlens binary that an app.py written
// by `gymlens env scaffold` for a built-in implementation execs.
const EnvGymBinary = "GYMLENS_BINARY"

// Files of a server directory written by `gymlens env scaffold`.
const (
	scaffoldEntrypoint   = "app.py"
	scaffoldRequirements = "requirements.txt"
	scaffoldConfigsDir   = "configs"
)

// defaultDomain is the domain of a resources server whose --domain is not
// given: upstream requires one and has "other" for a server that fits none.
const defaultDomain = "other"

// upstreamDomains are the values of upstream's Domain enum
// (nemo_gym/config_types.py), the only ones its config parser accepts.
func upstreamDomains() []string {
	return []string{"math", "coding", "agent", "knowledge", "instruction_following", "long_context",
		"safety", "games", "translation", "e2e", "rlhf", "other"}
}

// scaffoldName is what an instance name and an implementation (directory)
// name may be: one path element, usable in ${dotted.key} references.
var scaffoldName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]*$`)

var scaffoldCommand = command{
	name:    "scaffold",
	summary: "write a server directory that NeMo Gym's `gym env start` runs as a Go server",
	run:     runScaffold,
}

// scaffoldPlan is everything `gymlens env scaffold` writes, worked out before
// anything is touched.
type scaffoldPlan struct {
	dir      string            // <out>/<type>/<impl>, absolute
	files    map[string][]byte // path relative to dir -> content
	order    []string          // the keys of files, in writing order
	binary   string            // what app.py execs, absolute
	override string            // the variable that replaces binary at launch
	config   string            // configs/<impl>.yaml, absolute
}

func runScaffold(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gymlens env scaffold", flag.ContinueOnError)
	impl := fs.String("impl", "", "built-in implementation ("+implList()+"), or with --binary the directory name of yours (required)")
	serverType := fs.String("type", "", "server type: "+strings.Join(contract.ServerTypes(), ", ")+" (default: the built-in's; required with --binary)")
	name := fs.String("name", "", "instance name: the config's top-level key (default: the implementation)")
	out := fs.String("out", ".", "root directory; the server goes to <out>/<type>/<impl>/")
	binary := fs.String("binary", "", "your environment program, run with no arguments under the launch contract (default: this gymlens binary, run as `gymlens serve`)")
	domain := fs.String("domain", "", "resources servers: upstream's domain ("+strings.Join(upstreamDomains(), ", ")+"; default "+defaultDomain+")")
	resourcesServer := fs.String("resources-server", "", "agents: instance name of the resources server (required for simple_agent)")
	modelServer := fs.String("model-server", "", "agents: instance name of the model server (default policy_model for simple_agent)")
	force := fs.Bool("force", false, "overwrite files that exist")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gymlens env scaffold --impl IMPL [--type TYPE] [--name INSTANCE] [--out DIR] [--binary PATH] [flags]\n\n"+
			"Writes <out>/<type>/<impl>/, a server directory NeMo Gym's own `gym env start`\n"+
			"accepts as it is: app.py, which replaces the Python process with a Go server\n"+
			"(os.execv; environment, working directory and process id kept), a\n"+
			"requirements.txt with nothing to install, and configs/<impl>.yaml holding\n"+
			"the instance block. The binary's absolute path is written into app.py;\n"+
			"$%s (or, for --binary, $GYMLENS_<IMPL>_BINARY) replaces it at launch.\n"+
			"Existing files are left alone unless --force is given.\n"+
			"See docs/joining-a-nemo-gym-fleet.md.\n\nFlags:\n", EnvGymBinary)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	plan, err := planScaffold(scaffoldRequest{
		impl: *impl, serverType: *serverType, name: *name, out: *out, binary: *binary,
		domain: *domain, domainSet: set["domain"], resourcesServer: *resourcesServer, modelServer: *modelServer,
	})
	if err != nil {
		fmt.Fprintf(stderr, "gymlens env scaffold: %v\n", err)
		return exitUsage
	}
	if !*force {
		var existing []string
		for _, rel := range plan.order {
			if _, err := os.Lstat(filepath.Join(plan.dir, rel)); err == nil {
				existing = append(existing, filepath.Join(plan.dir, rel))
			}
		}
		if len(existing) > 0 {
			fmt.Fprintf(stderr, "gymlens env scaffold: not overwriting %s: pass --force to replace\n", strings.Join(existing, ", "))
			return exitUsage
		}
	}
	for _, rel := range plan.order {
		path := filepath.Join(plan.dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Fprintf(stderr, "gymlens env scaffold: %v\n", err)
			return 1
		}
		if err := os.WriteFile(path, plan.files[rel], 0o644); err != nil {
			fmt.Fprintf(stderr, "gymlens env scaffold: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s\n", path)
	}
	root := filepath.Dir(filepath.Dir(plan.dir))
	fmt.Fprintf(stdout, "app.py execs %s (set $%s to run another binary)\n", plan.binary, plan.override)
	fmt.Fprintf(stdout, "start it with NeMo Gym: gymlens env start --search-dir %s --config %s\n", root, plan.config)
	return exitOK
}

// scaffoldRequest is the command line of `gymlens env scaffold`.
type scaffoldRequest struct {
	impl, serverType, name, out, binary string
	domain                              string
	domainSet                           bool
	resourcesServer, modelServer        string
}

// planScaffold checks the request and works out the files; it touches
// nothing. Every error is a usage error.
func planScaffold(r scaffoldRequest) (*scaffoldPlan, error) {
	if r.impl == "" {
		return nil, errors.New("--impl is required")
	}
	if !scaffoldName.MatchString(r.impl) {
		return nil, fmt.Errorf("--impl %q: want a directory name of letters, digits, '_' and '-'", r.impl)
	}
	var builtin registry.Impl
	if r.binary == "" {
		var ok bool
		if r.serverType == "" {
			builtin, ok = registry.ByName(r.impl)
		} else {
			builtin, ok = registry.Lookup(r.serverType, r.impl)
		}
		if !ok {
			return nil, unknownImpl(r.serverType, r.impl)
		}
		r.serverType = builtin.Type
	} else {
		if r.serverType == "" {
			return nil, fmt.Errorf("--type is required with --binary (one of %s)", strings.Join(contract.ServerTypes(), ", "))
		}
		if !contract.IsServerType(r.serverType) {
			return nil, fmt.Errorf("--type %q is not a server type (want one of %s)", r.serverType, strings.Join(contract.ServerTypes(), ", "))
		}
	}
	if r.name == "" {
		r.name = r.impl
	}
	if !scaffoldName.MatchString(r.name) {
		return nil, fmt.Errorf("--name %q: want letters, digits, '_' and '-'", r.name)
	}
	if gymconfig.IsReserved(r.name) {
		return nil, fmt.Errorf("--name %q is one of NeMo Gym's reserved top-level keys, not an instance name", r.name)
	}
	isResources := r.serverType == contract.ServerTypeResources
	isAgent := r.serverType == contract.ServerTypeAgent
	switch {
	case !isResources && r.domainSet:
		return nil, fmt.Errorf("--domain applies to %s only (upstream drops it from %s)", contract.ServerTypeResources, r.serverType)
	case isResources && r.domain == "":
		r.domain = defaultDomain
	}
	if isResources && !slices.Contains(upstreamDomains(), r.domain) {
		msg := fmt.Sprintf("--domain %q is not one of upstream's domains (%s)", r.domain, strings.Join(upstreamDomains(), ", "))
		if n := gymconfig.Nearest(r.domain, upstreamDomains()); n != "" {
			msg += fmt.Sprintf("; did you mean %q?", n)
		}
		return nil, errors.New(msg)
	}
	if !isAgent && (r.resourcesServer != "" || r.modelServer != "") {
		return nil, fmt.Errorf("--resources-server and --model-server apply to %s only", contract.ServerTypeAgent)
	}
	if isAgent && r.binary == "" {
		if r.resourcesServer == "" {
			return nil, fmt.Errorf("--resources-server is required for %s: the instance name of the resources server it verifies with", r.impl)
		}
		if r.modelServer == "" {
			r.modelServer = "policy_model"
		}
	}
	for flagName, v := range map[string]string{"--resources-server": r.resourcesServer, "--model-server": r.modelServer} {
		if v != "" && !scaffoldName.MatchString(v) {
			return nil, fmt.Errorf("%s %q: want an instance name of letters, digits, '_' and '-'", flagName, v)
		}
	}

	out, err := filepath.Abs(r.out)
	if err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	plan := &scaffoldPlan{dir: filepath.Join(out, r.serverType, r.impl)}
	if fi, err := os.Stat(out); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("--out %s is not a directory", out)
	}
	if _, err := os.Stat(filepath.Join(plan.dir, "pyproject.toml")); err == nil {
		return nil, fmt.Errorf("%s has a pyproject.toml: upstream refuses a server directory with both it and a requirements.txt; remove it or choose another --out", plan.dir)
	}

	var argv []string
	if r.binary == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("cannot find this gymlens binary (pass --binary): %w", err)
		}
		if resolved, err := filepath.EvalSymlinks(self); err == nil {
			self = resolved
		}
		plan.binary, plan.override, argv = self, EnvGymBinary, []string{"serve"}
	} else {
		abs, err := filepath.Abs(r.binary)
		if err != nil {
			return nil, fmt.Errorf("--binary: %w", err)
		}
		fi, err := os.Stat(abs)
		switch {
		case err != nil:
			return nil, fmt.Errorf("--binary: %w", err)
		case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
			return nil, fmt.Errorf("--binary %s is not an executable file", abs)
		}
		plan.binary, plan.override = abs, binaryOverrideVar(r.impl)
	}
	plan.config = filepath.Join(plan.dir, scaffoldConfigsDir, r.impl+".yaml")

	configRel := filepath.Join(scaffoldConfigsDir, r.impl+".yaml")
	cfg, err := scaffoldConfig(r, builtin)
	if err != nil {
		return nil, err
	}
	plan.files = map[string][]byte{
		scaffoldEntrypoint:   appPy(plan.binary, argv, plan.override),
		scaffoldRequirements: []byte(requirementsTxt),
		configRel:            cfg,
	}
	plan.order = []string{scaffoldEntrypoint, scaffoldRequirements, configRel}
	return plan, nil
}

// unknownImpl is the error for a built-in implementation that does not
// exist, naming the known ones and the nearest.
func unknownImpl(serverType, impl string) error {
	var known []string
	if serverType != "" {
		if !contract.IsServerType(serverType) {
			return fmt.Errorf("--type %q is not a server type (want one of %s)", serverType, strings.Join(contract.ServerTypes(), ", "))
		}
		known = registry.Names(serverType)
	} else {
		for _, t := range contract.ServerTypes() {
			known = append(known, registry.Names(t)...)
		}
	}
	msg := fmt.Sprintf("no built-in implementation %q", impl)
	if serverType != "" {
		msg += fmt.Sprintf(" of %s", serverType)
	}
	msg += fmt.Sprintf(" (known: %s)", strings.Join(known, ", "))
	if n := gymconfig.Nearest(impl, known); n != "" {
		msg += fmt.Sprintf("; did you mean %q?", n)
	}
	return errors.New(msg + "; pass --binary and --type for a program of your own")
}

// binaryOverrideVar is the variable that replaces a user binary at launch:
// GYMLENS_<IMPL>_BINARY, the implementation upper-cased with '-' as '_'.
func binaryOverrideVar(impl string) string {
	return "GYMLENS_" + strings.ToUpper(strings.ReplaceAll(impl, "-", "_")) + "_BINARY"
}

// requirementsTxt is the server directory's requirements.txt. Upstream
// installs it with uv next to its own dependencies; app.py needs nothing
// beyond the standard library. It is a comment rather than empty: outside
// a Gym checkout upstream pipes `grep -v` of the file into uv, and grep
// selecting no line fails the pipeline when nemo_gym_log_dir sets
// pipefail.
const requirementsTxt = `# Written by gymlens env scaffold (gymlens). app.py needs only the Python
# standard library: it replaces itself with a Go server. NeMo Gym installs
# its own dependencies into this server's venv next to this (empty) list.
`

// appPy is the entrypoint: it execs binary with argv, keeping the
// environment, the working directory and the process id, so the process
// upstream's orchestrator started is the Go server itself.
func appPy(binary string, argv []string, override string) []byte {
	args := make([]string, len(argv))
	for i, a := range argv {
		args[i] = strconv.Quote(a)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `"""NeMo Gym server entrypoint written by gymlens env scaffold (gymlens).

NeMo Gym's gym env start runs "python app.py" in this directory with
NEMO_GYM_CONFIG_DICT (the fleet config as YAML) and NEMO_GYM_CONFIG_PATH (this
server's instance name) set. This file replaces the Python process with a Go
server that reads the same two variables: os.execv keeps the environment, the
working directory and the process id, so the process the orchestrator watches
is the server itself. Under dry_run the Go server checks its config and exits 0.
$%[1]s, when set, names the binary to run instead of the one below.
"""

import os
import sys

BINARY = %[2]s
ARGS = [%[3]s]
OVERRIDE = %[4]s


def main():
    binary = os.environ.get(OVERRIDE) or BINARY
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(binary, [binary] + ARGS)
    except OSError as e:
        sys.stderr.write("app.py: cannot run %%s: %%s (set $%%s to the Go server's path)\n" %% (binary, e.strerror, OVERRIDE))
        sys.exit(127)


if __name__ == "__main__":
    main()
`, override, strconv.Quote(binary), strings.Join(args, ", "), strconv.Quote(override))
	return b.Bytes()
}

// scaffoldConfig is configs/<impl>.yaml: the instance block in upstream's
// shape, {instance: {type: {impl: {entrypoint, domain, ...}}}}, and the
// built-in implementation's configuration keys with their defaults as
// comments.
func scaffoldConfig(r scaffoldRequest, builtin registry.Impl) ([]byte, error) {
	block := &yaml.Node{Kind: yaml.MappingNode}
	add := func(m *yaml.Node, k string, v *yaml.Node) {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, v)
	}
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }
	add(block, "entrypoint", str(scaffoldEntrypoint))
	if r.serverType == contract.ServerTypeResources {
		add(block, "domain", str(r.domain))
	}
	ref := func(field, typ, name string) {
		if name == "" {
			return
		}
		m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		add(m, "type", str(typ))
		add(m, "name", str(name))
		add(block, field, m)
	}
	ref("resources_server", contract.ServerTypeResources, r.resourcesServer)
	ref("model_server", contract.ServerTypeModel, r.modelServer)
	typeNode := &yaml.Node{Kind: yaml.MappingNode}
	add(typeNode, r.impl, block)
	inst := &yaml.Node{Kind: yaml.MappingNode}
	add(inst, r.serverType, typeNode)
	doc := &yaml.Node{Kind: yaml.MappingNode}
	add(doc, r.name, inst)

	var b bytes.Buffer
	runBy := "your program " + r.binary
	if r.binary == "" {
		runBy = "gymlens's built-in " + r.impl
	}
	fmt.Fprintf(&b, "# Written by gymlens env scaffold (gymlens): the NeMo Gym %s instance\n"+
		"# %q, served by %s. Give this file to gymlens env start\n"+
		"# (--config); the launcher fills in host and port unless they are set here.\n", r.serverType, r.name, runBy)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if r.binary != "" {
		b.WriteString("      # your program's own configuration keys go here, next to entrypoint\n")
		return b.Bytes(), nil
	}
	defaults, err := implDefaults(builtin)
	if err != nil {
		return nil, err
	}
	if len(defaults.Content) == 0 {
		b.WriteString("      # " + r.impl + " takes no configuration keys\n")
		return b.Bytes(), nil
	}
	var d bytes.Buffer
	denc := yaml.NewEncoder(&d)
	denc.SetIndent(2)
	if err := denc.Encode(defaults); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	_ = denc.Close()
	b.WriteString("      # configuration keys of " + r.impl + ", with their defaults:\n")
	for _, line := range strings.Split(strings.TrimRight(d.String(), "\n"), "\n") {
		b.WriteString("      # " + line + "\n")
	}
	return b.Bytes(), nil
}

// implDefaults is a built-in implementation's default configuration as a
// YAML mapping in the order of its JSON encoding, without the keys whose
// default is empty (an agent's peer URLs, which come from the references,
// and other unset options).
func implDefaults(impl registry.Impl) (*yaml.Node, error) {
	raw, err := json.Marshal(impl.NewConfig())
	if err != nil {
		return nil, fmt.Errorf("%s defaults: %w", impl.Name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n, err := jsonNode(dec)
	if err != nil {
		return nil, fmt.Errorf("%s defaults: %w", impl.Name, err)
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s defaults: not an object", impl.Name)
	}
	kept := n.Content[:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		v := n.Content[i+1]
		if v.Kind == yaml.ScalarNode && (v.Tag == "!!null" || (v.Tag == "!!str" && v.Value == "")) {
			continue
		}
		kept = append(kept, n.Content[i], v)
	}
	n.Content = kept
	return n, nil
}

// jsonNode reads one JSON value from dec as a YAML node, keeping the
// order of object members.
func jsonNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		kind := yaml.SequenceNode
		if v == '{' {
			kind = yaml.MappingNode
		}
		n := &yaml.Node{Kind: kind}
		for dec.More() {
			if kind == yaml.MappingNode {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k.(string)})
			}
			c, err := jsonNode(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, c)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(v.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}
