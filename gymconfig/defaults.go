package gymconfig

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/gymlens/gymlens/contract"
	"go.yaml.in/yaml/v3"
)

// maxBindAttempts bounds the test-binds of one port pick.
const maxBindAttempts = 50

// portPlan is what Defaults and Reassign read from a resolved config.
type portPlan struct {
	cfg         *Config
	defaultHost string
	headPort    int
	low, high   int
	disallowed  []int // as configured
}

func (d *Dict) plan(lookupEnv func(string) (string, bool)) (*portPlan, error) {
	cfg, err := d.Resolve(lookupEnv)
	if err != nil {
		return nil, err
	}
	p := &portPlan{cfg: cfg, low: DefaultPortRangeLow, high: DefaultPortRangeHigh}
	if v, ok := cfg.Root[KeyDefaultHost]; ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s: must be a string, got %s", KeyDefaultHost, pyStr(v))
		}
		p.defaultHost = s
	}
	if p.defaultHost == "" {
		p.defaultHost = DefaultHost
	}
	_, p.headPort = cfg.HeadServer()
	if hs, ok := cfg.Root[KeyHeadServer].(map[string]any); ok {
		if v, ok := hs["port"]; ok && v != nil {
			if err := checkPort(KeyHeadServer+".port", v); err != nil {
				return nil, err
			}
		}
	}
	for _, r := range []struct {
		key string
		dst *int
	}{{KeyPortRangeLow, &p.low}, {KeyPortRangeHigh, &p.high}} {
		v, ok := cfg.Root[r.key]
		if !ok || v == nil {
			continue
		}
		n, ok := asInt(v)
		if !ok || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%s: %s is not a port number", r.key, pyStr(v))
		}
		*r.dst = n
	}
	if p.low > p.high {
		return nil, fmt.Errorf("%s..%s: %d..%d is an empty range", KeyPortRangeLow, KeyPortRangeHigh, p.low, p.high)
	}
	if v, ok := cfg.Root[KeyDisallowedPorts]; ok && v != nil {
		l, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: must be a list of ports, got %s", KeyDisallowedPorts, kindOf(v))
		}
		for i, e := range l {
			n, ok := asInt(e)
			if !ok {
				return nil, fmt.Errorf("%s[%d]: %s is not a port number", KeyDisallowedPorts, i, pyStr(e))
			}
			p.disallowed = append(p.disallowed, n)
		}
	}
	// Fixed ports: valid, and not given twice.
	owner := map[int]string{p.headPort: KeyHeadServer}
	for _, in := range cfg.Instances {
		v, ok := in.Block["port"]
		if !ok || v == nil {
			continue
		}
		where := strings.Join(append(in.path(), "port"), ".")
		if err := checkPort(where, v); err != nil {
			return nil, err
		}
		port := in.Port()
		if port == 0 {
			continue
		}
		if o, dup := owner[port]; dup {
			return nil, fmt.Errorf("%s: port %d is also given to %s", where, port, o)
		}
		owner[port] = strconv.Quote(in.Name)
	}
	return p, nil
}

func checkPort(where string, v any) error {
	n, ok := asInt(v)
	if !ok || n < 0 || n > 65535 {
		return fmt.Errorf("%s: %s is not a port number", where, pyStr(v))
	}
	return nil
}

// used is every port that must not be handed out: the configured
// disallowed ports, the head port and every port instances already have.
func (p *portPlan) used() map[int]bool {
	u := map[int]bool{p.headPort: true}
	for _, n := range p.disallowed {
		u[n] = true
	}
	for _, in := range p.cfg.Instances {
		if port := in.Port(); port > 0 {
			u[port] = true
		}
	}
	return u
}

// Defaults fills, in d (so that YAML carries them), what upstream's parser
// fills before it spawns servers:
//
//   - host = default_host (DefaultHost when unset) in server blocks without one;
//   - port, in server blocks without one, = a random free port of
//     [port_range_low, port_range_high] (DefaultPortRangeLow..High) that is
//     not in disallowed_ports, not the head port, not given to another
//     instance, and that a test bind on the host (listen, close) accepts;
//   - port_range_low / port_range_high when absent;
//   - head_server's host (default_host) and port (DefaultHeadPort), each
//     when absent, as upstream fills them per key;
//   - disallowed_ports = head port + every port given (+ any already listed);
//   - skip_verification / skip_verification_reward copied from the top
//     level into agent blocks lacking them.
//
// It returns the instance names whose port it assigned. Fixed ports are not
// probed, but a fixed port given twice (or equal to the head port) is an
// error. d must resolve: Defaults reads default_host etc. through Resolve,
// with lookupEnv. A nil rnd uses a randomly seeded source.
func (d *Dict) Defaults(lookupEnv func(string) (string, bool), rnd *rand.Rand) (assigned []string, err error) {
	// Work on a copy, so that a failure leaves d as it was.
	work := &Dict{root: cloneNode(d.root)}
	assigned, err = work.defaults(lookupEnv, rnd)
	if err != nil {
		return nil, err
	}
	d.root = work.root
	return assigned, nil
}

func (d *Dict) defaults(lookupEnv func(string) (string, bool), rnd *rand.Rand) (assigned []string, err error) {
	p, err := d.plan(lookupEnv)
	if err != nil {
		return nil, err
	}
	if rnd == nil {
		rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	cfg := p.cfg
	used := p.used()
	ports := []int{p.headPort}
	skip, hasSkip := cfg.Root[KeySkipVerification]
	skipReward, hasSkipReward := cfg.Root[KeySkipVerificationReward]
	for _, in := range cfg.Instances {
		host := in.Host()
		if host == "" {
			host = p.defaultHost
			if err := d.Set(append(in.path(), "host"), host); err != nil {
				return nil, err
			}
		}
		port := in.Port()
		if port == 0 {
			port, err = pickPort(rnd, p.low, p.high, used, host)
			if err != nil {
				return nil, fmt.Errorf("instance %q: %w", in.Name, err)
			}
			if err := d.Set(append(in.path(), "port"), port); err != nil {
				return nil, err
			}
			used[port] = true
			assigned = append(assigned, in.Name)
		}
		ports = append(ports, port)
		if in.Type == contract.ServerTypeAgent {
			if _, ok := in.Block[KeySkipVerification]; !ok && hasSkip && skip != nil {
				if err := d.Set(append(in.path(), KeySkipVerification), skip); err != nil {
					return nil, err
				}
			}
			if _, ok := in.Block[KeySkipVerificationReward]; !ok && hasSkipReward && skipReward != nil {
				if err := d.Set(append(in.path(), KeySkipVerificationReward), skipReward); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, k := range []struct {
		key string
		v   int
	}{{KeyPortRangeLow, p.low}, {KeyPortRangeHigh, p.high}} {
		if v, ok := cfg.Root[k.key]; !ok || v == nil {
			if err := d.Set([]string{k.key}, k.v); err != nil {
				return nil, err
			}
		}
	}
	// head_server is filled per key, so a config may pin just one.
	hs, _ := cfg.Root[KeyHeadServer].(map[string]any)
	for _, k := range []struct {
		key string
		v   any
	}{{"host", p.defaultHost}, {"port", DefaultHeadPort}} {
		if _, ok := hs[k.key]; !ok {
			if err := d.Set([]string{KeyHeadServer, k.key}, k.v); err != nil {
				return nil, err
			}
		}
	}
	if err := d.Set([]string{KeyDisallowedPorts}, mergePorts(ports, p.disallowed)); err != nil {
		return nil, err
	}
	return assigned, nil
}

// mergePorts is a then the ports of b not in a, without repeats.
func mergePorts(a, b []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, l := range [][]int{a, b} {
		for _, n := range l {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// Reassign gives instance name a new random free port (after a bind
// collision on its current one) and adds it to disallowed_ports; the old
// port stays disallowed.
func (d *Dict) Reassign(lookupEnv func(string) (string, bool), rnd *rand.Rand, name string) (int, error) {
	p, err := d.plan(lookupEnv)
	if err != nil {
		return 0, err
	}
	in, ok := p.cfg.Instance(name)
	if !ok {
		return 0, fmt.Errorf("reassign port: no instance %q%s", name, didYouMean(name, p.cfg.instanceNames()))
	}
	if rnd == nil {
		rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	host := in.Host()
	if host == "" {
		host = p.defaultHost
	}
	used := p.used()
	port, err := pickPort(rnd, p.low, p.high, used, host)
	if err != nil {
		return 0, fmt.Errorf("instance %q: %w", name, err)
	}
	work := &Dict{root: cloneNode(d.root)}
	if err := work.Set(append(in.path(), "port"), port); err != nil {
		return 0, err
	}
	ports := []int{p.headPort}
	for _, o := range p.cfg.Instances {
		if o.Port() > 0 {
			ports = append(ports, o.Port())
		}
	}
	ports = append(ports, port)
	if err := work.Set([]string{KeyDisallowedPorts}, mergePorts(ports, p.disallowed)); err != nil {
		return 0, err
	}
	d.root = work.root
	return port, nil
}

// pickPort draws random ports of [low, high] not in used until a test bind
// on host succeeds.
func pickPort(rnd *rand.Rand, low, high int, used map[int]bool, host string) (int, error) {
	n := high - low + 1
	free := n
	for port := range used {
		if port >= low && port <= high {
			free--
		}
	}
	tried := map[int]bool{}
	var lastErr error
	for attempt := 0; attempt < maxBindAttempts && free > 0; attempt++ {
		port := low + rnd.IntN(n)
		for k := 0; used[port] || tried[port]; k++ {
			if k > 64 { // crowded range: walk to the next candidate
				port = low + (port-low+1)%n
				continue
			}
			port = low + rnd.IntN(n)
		}
		tried[port] = true
		free--
		if lastErr = probe(host, port); lastErr == nil {
			return port, nil
		}
	}
	if lastErr != nil {
		return 0, fmt.Errorf("no free port in %s..%s (%d..%d) on host %q: %w", KeyPortRangeLow, KeyPortRangeHigh, low, high, host, lastErr)
	}
	return 0, fmt.Errorf("no free port in %s..%s (%d..%d): every port is disallowed or taken", KeyPortRangeLow, KeyPortRangeHigh, low, high)
}

// probe test-binds host:port and releases it. A host that is not an
// address of this machine is probed on all interfaces, as upstream does.
func probe(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil && errors.Is(err, syscall.EADDRNOTAVAIL) {
		l, err = net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	}
	if err != nil {
		return err
	}
	return l.Close()
}

// cloneNode deep-copies a node tree (which Parse left without aliases).
func cloneNode(n *yaml.Node) *yaml.Node {
	c := *n
	if n.Content != nil {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, e := range n.Content {
			c.Content[i] = cloneNode(e)
		}
	}
	return &c
}
