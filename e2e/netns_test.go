package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Simulated hosts: Linux network namespaces this test makes, each with one
// address on a bridge that lives in a namespace of its own, so traffic
// stays between those namespaces (and each one's loopback) and the host's
// own network is never touched.

// netLab is a set of namespaces on one bridge.
type netLab struct {
	hosts []labHost
}

// labHost is one simulated host: its namespace, its address and its name,
// which every host of the lab resolves (its namespace's /etc/hosts).
type labHost struct {
	ns, ip, name string
}

// labs numbers the labs of this test process, so two never share a name.
var labs atomic.Int32

// newNetLab makes n hosts, 10.199.<k>.1 .. n named gym-host1 .. n, on a
// bridge, and removes every namespace (by name) and hosts file it made
// when the test ends. It skips the test
// with the reason when namespaces cannot be made here.
func newNetLab(t *testing.T, n int) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("simulated hosts need network namespaces, which need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("simulated hosts need the ip command (iproute2)")
	}
	// A prefix of our own: namespaces of a crashed earlier run, or of a
	// test running beside this one, are never touched.
	tag := fmt.Sprintf("gl%d-%d", os.Getpid()%100000, labs.Add(1))
	subnet := fmt.Sprintf("10.199.%d", os.Getpid()%250+1)
	bridgeNS := tag + "-br"
	var made []string
	t.Cleanup(func() {
		for _, ns := range made {
			if out, err := exec.Command("ip", "netns", "delete", ns).CombinedOutput(); err != nil {
				t.Errorf("remove namespace %s: %v: %s", ns, err, out)
			}
		}
	})
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	addNS := func(ns string) error {
		if err := ip("netns", "add", ns); err != nil {
			return err
		}
		made = append(made, ns)
		return ip("-n", ns, "link", "set", "lo", "up")
	}
	if err := addNS(bridgeNS); err != nil {
		t.Skipf("cannot make network namespaces here: %v", err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ip("-n", bridgeNS, "link", "add", "br0", "type", "bridge"))
	must(ip("-n", bridgeNS, "link", "set", "br0", "up"))
	lab := &netLab{}
	for i := 1; i <= n; i++ {
		ns := fmt.Sprintf("%s-h%d", tag, i)
		must(addNS(ns))
		port := fmt.Sprintf("p%d", i)
		must(ip("-n", bridgeNS, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns))
		must(ip("-n", bridgeNS, "link", "set", port, "master", "br0", "up"))
		addr := fmt.Sprintf("%s.%d", subnet, i)
		must(ip("-n", ns, "addr", "add", addr+"/24", "dev", "eth0"))
		must(ip("-n", ns, "link", "set", "eth0", "up"))
		lab.hosts = append(lab.hosts, labHost{ns: ns, ip: addr, name: fmt.Sprintf("gym-host%d", i)})
	}
	// Names: `ip netns exec` puts /etc/netns/<ns>/hosts over /etc/hosts
	// for what runs in <ns>.
	hosts := "127.0.0.1 localhost\n::1 localhost\n"
	for _, h := range lab.hosts {
		hosts += h.ip + " " + h.name + "\n"
	}
	for _, h := range lab.hosts {
		etc := filepath.Join("/etc/netns", h.ns)
		if err := os.MkdirAll(etc, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := os.RemoveAll(etc); err != nil {
				t.Errorf("remove %s: %v", etc, err)
			}
			_ = os.Remove("/etc/netns") // only when no other lab's is left
		})
		must(os.WriteFile(filepath.Join(etc, "hosts"), []byte(hosts), 0o644))
	}
	return lab
}

// inNS returns argv run inside host h's namespace (ip netns exec execs
// argv, so the PID is argv's).
func (h labHost) inNS(argv ...string) []string {
	return append([]string{"ip", "netns", "exec", h.ns}, argv...)
}

// client returns an HTTP client whose connections are made from inside
// h's namespace: each dial runs on an OS thread switched into it, which
// is then discarded (the goroutine exits locked), so no thread of the
// test returns to the scheduler in another namespace.
func (h labHost) client(timeout time.Duration) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			fd, err := unix.Open("/var/run/netns/"+h.ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				ch <- result{nil, err}
				return
			}
			defer unix.Close(fd)
			if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
				ch <- result{nil, fmt.Errorf("setns %s: %w", h.ns, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}
