// Package layering holds the module's import-layering tests and nothing
// else: no other package imports it, and it has no non-test files.
//
// The rule it holds: the OpenTelemetry SDK (go.opentelemetry.io/otel/sdk
// and everything under it) is reached only through the lens tree (lens,
// lens/...) and the telemetry tree (telemetry, telemetry/...). A server, the
// collection driver, the report, the orchestrator or the gym command may
// import lens or telemetry, which build the SDK pipelines, but must not
// import the SDK itself, nor a third-party package that does (an exporter,
// say). So the decision of how a process exports stays in one place, and a
// package that only records telemetry links the API alone.
//
// Where the rule is checked, and why there:
//
//   - The packages' own graphs, as `go list -deps` gives them without
//     -test. Test files are left out on purpose: tests assert on real SDK
//     pipelines (a metric ManualReader, tracetest's in-memory exporter),
//     and a test binary is never shipped.
//   - Test rigs (internal/testenv, internal/servertest,
//     environment/envtest) get no exemption. They are ordinary packages
//     that any package could import, none of them needs the SDK today, and
//     one that did would hand it to every test that uses it; such a rig
//     would have to move its SDK part into lens or into a _test.go file.
//   - The module root has no package, and package contract must stay
//     standard-library-only, so the test lives in a test-only package of
//     its own. tools/ is a separate module and is not checked.
package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sdkRoot is the import path whose tree only the gateways may reach.
const sdkRoot = "go.opentelemetry.io/otel/sdk"

// gatewayRoots are the module-relative trees allowed to import the SDK.
var gatewayRoots = []string{"lens", "telemetry"}

// listedPackage is the part of `go list -json` output the tests read.
type listedPackage struct {
	ImportPath string
	Imports    []string
	Standard   bool
	Module     *struct{ Path string }
}

// graph is a module's import graph as `go list -deps` reports it.
type graph struct {
	module string                    // the module path
	pkgs   map[string]*listedPackage // every listed package, by import path
	own    []string                  // the module's packages, sorted
}

// loadGraph runs `go list -deps -json` over every package of the module
// that holds this test and returns the resulting graph. The test is
// skipped when no go command is on PATH.
func loadGraph(t *testing.T) *graph {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: the layering test needs `go list`")
	}
	gomod := strings.TrimSpace(run(t, goBin, ".", "env", "GOMOD"))
	if gomod == "" || gomod == "/dev/null" {
		t.Fatalf("go env GOMOD = %q: the test is not running inside the module", gomod)
	}
	root := filepath.Dir(gomod)
	module := strings.TrimSpace(run(t, goBin, root, "list", "-m"))
	out := run(t, goBin, root, "list", "-deps", "-json=ImportPath,Imports,Standard,Module", "./...")
	g, err := parseGraph(module, strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.own) == 0 {
		t.Fatalf("go list found no package of module %s", module)
	}
	return g
}

// run runs the go command in dir and returns its standard output.
func run(t *testing.T, goBin, dir string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// parseGraph reads a stream of `go list -json` objects.
func parseGraph(module string, r io.Reader) (*graph, error) {
	g := &graph{module: module, pkgs: map[string]*listedPackage{}}
	dec := json.NewDecoder(r)
	for {
		p := new(listedPackage)
		err := dec.Decode(p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading go list output: %w", err)
		}
		g.pkgs[p.ImportPath] = p
		if g.isOwn(p.ImportPath) {
			g.own = append(g.own, p.ImportPath)
		}
	}
	slices.Sort(g.own)
	return g, nil
}

// isOwn reports whether path is a package of the module.
func (g *graph) isOwn(path string) bool {
	return path == g.module || strings.HasPrefix(path, g.module+"/")
}

// isGateway reports whether path is in one of the module's gateway trees.
func (g *graph) isGateway(path string) bool {
	rel, ok := strings.CutPrefix(path, g.module+"/")
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(rel, "/")
	return slices.Contains(gatewayRoots, first)
}

// isSDK reports whether path is the SDK or a package under it.
func isSDK(path string) bool {
	return path == sdkRoot || strings.HasPrefix(path, sdkRoot+"/")
}

// sdkPath returns a shortest import chain from start to an SDK package
// that passes through no gateway package, or nil when there is none.
// Gateways are not entered: reaching the SDK through them is the point.
func (g *graph) sdkPath(start string) []string {
	prev := map[string]string{start: ""}
	queue := []string{start}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if isSDK(cur) {
			var chain []string
			for p := cur; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		if cur != start && g.isGateway(cur) {
			continue
		}
		p := g.pkgs[cur]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// violations returns, for every module package outside the gateways that
// reaches the SDK other than through a gateway, one chain showing how.
func (g *graph) violations() [][]string {
	var out [][]string
	for _, path := range g.own {
		if g.isGateway(path) {
			continue
		}
		if chain := g.sdkPath(path); chain != nil {
			out = append(out, chain)
		}
	}
	return out
}

// TestOnlyLensAndTelemetryReachTheSDK is the layering rule on the real
// module: no package outside lens* and telemetry* imports the SDK, directly
// or through a third-party package, other than through lens or telemetry.
func TestOnlyLensAndTelemetryReachTheSDK(t *testing.T) {
	g := loadGraph(t)
	for _, chain := range g.violations() {
		t.Errorf("%s reaches the OpenTelemetry SDK outside lens and telemetry:\n\t%s\n"+
			"move the SDK-touching code into lens or telemetry behind a small API",
			chain[0], strings.Join(chain, "\n\t-> "))
	}
	// The rule is only worth something if the gateways really are where
	// the SDK comes in; a rename of the trees would make it vacuous.
	var gatewaysOnSDK int
	for _, path := range g.own {
		if g.isGateway(path) && g.sdkPath(path) != nil {
			gatewaysOnSDK++
		}
	}
	if gatewaysOnSDK == 0 {
		t.Errorf("no package under %v reaches %s: the gateway trees moved, fix gatewayRoots", gatewayRoots, sdkRoot)
	}
}

// TestContractIsStandardLibraryOnly holds package contract's promise: any
// program can read the fleet's names without linking OpenTelemetry or any
// other module.
func TestContractIsStandardLibraryOnly(t *testing.T) {
	g := loadGraph(t)
	start := g.module + "/contract"
	if g.pkgs[start] == nil {
		t.Fatalf("go list did not list %s", start)
	}
	seen := map[string]bool{start: true}
	queue := []string{start}
	for len(queue) > 0 {
		p := g.pkgs[queue[0]]
		queue = queue[1:]
		for _, imp := range p.Imports {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			dep := g.pkgs[imp]
			switch {
			case dep == nil:
				t.Errorf("contract depends on %s, which go list did not report", imp)
			case !dep.Standard:
				t.Errorf("contract depends on %s, outside the standard library (imported by %s)", imp, p.ImportPath)
			default:
				queue = append(queue, imp)
			}
		}
	}
}

// TestSDKPathRule runs the graph walk on made-up graphs, so the rule's
// edges are exercised without changing the module: a direct import, one
// through a third-party exporter, one through a gateway (allowed), one
// through a package whose name only starts like a gateway's.
func TestSDKPathRule(t *testing.T) {
	const m = "example.com/m"
	pkgs := map[string][]string{
		m + "/lens":            {sdkRoot + "/trace"},
		m + "/lens/sub":        {sdkRoot + "/metric"},
		m + "/telemetry":       {m + "/lens"},
		m + "/lenses":          {sdkRoot},
		m + "/server":          {m + "/telemetry", "fmt"},
		m + "/report":          {"fmt"},
		m + "/direct":          {sdkRoot + "/metric"},
		m + "/viaexporter":     {"example.org/exporter"},
		m + "/vialookalike":    {m + "/lenses"},
		m + "/viaown":          {m + "/direct"},
		"example.org/exporter": {sdkRoot + "/trace"},
		sdkRoot + "/trace":     {sdkRoot},
		sdkRoot + "/metric":    {sdkRoot},
		sdkRoot:                nil,
		"fmt":                  nil,
	}
	var stream bytes.Buffer
	enc := json.NewEncoder(&stream)
	for path, imports := range pkgs {
		p := listedPackage{ImportPath: path, Imports: imports, Standard: path == "fmt"}
		if strings.HasPrefix(path, m) {
			p.Module = &struct{ Path string }{m}
		}
		if err := enc.Encode(p); err != nil {
			t.Fatal(err)
		}
	}
	g, err := parseGraph(m, &stream)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, chain := range g.violations() {
		got = append(got, strings.Join(chain, " -> "))
	}
	want := []string{
		m + "/direct -> " + sdkRoot + "/metric",
		m + "/lenses -> " + sdkRoot,
		m + "/viaexporter -> example.org/exporter -> " + sdkRoot + "/trace",
		m + "/vialookalike -> " + m + "/lenses -> " + sdkRoot,
		m + "/viaown -> " + m + "/direct -> " + sdkRoot + "/metric",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n got %q\nwant %q", got, want)
	}
}
