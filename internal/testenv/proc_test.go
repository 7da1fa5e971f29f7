//go:build unix

package testenv_test

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
)

const bound = 30 * time.Second

func TestStartCapturesOutputAndExitCode(t *testing.T) {
	p := testenv.Start(t, exec.Command("sh", "-c", "echo out; echo err >&2; exit 3"), bound)
	if code := p.Wait(t); code != 3 || p.ExitCode() != 3 || p.Err() == nil {
		t.Errorf("exit %d (ExitCode %d, Err %v), want 3", code, p.ExitCode(), p.Err())
	}
	if p.Stdout.String() != "out\n" || p.Stderr.String() != "err\n" {
		t.Errorf("stdout %q stderr %q", p.Stdout, p.Stderr)
	}
}

func TestStartKeepsTheCallersOutput(t *testing.T) {
	cmd := exec.Command("sh", "-c", "echo out; echo err >&2")
	both := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = both, both
	p := testenv.Start(t, cmd, bound)
	if code := p.Wait(t); code != 0 || p.Stdout != both || p.Stderr != both || both.String() != "out\nerr\n" {
		t.Errorf("exit %d, output %q", code, both)
	}
	var plain bytes.Buffer
	cmd = exec.Command("true")
	cmd.Stdout = &plain
	if p := testenv.Start(t, cmd, bound); p.Stdout != nil || p.Stderr == nil || p.Wait(t) != 0 {
		t.Errorf("stdout %v stderr %v", p.Stdout, p.Stderr)
	}
}

// gone reports whether pid no longer runs (a zombie runs nothing).
func gone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) != nil
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && bytes.HasPrefix(stat[i+1:], []byte(" Z"))
}

func TestCleanupKillsTheProcessGroup(t *testing.T) {
	var p *testenv.Proc
	var child int
	t.Run("started", func(t *testing.T) {
		cmd := exec.Command("sh", "-c", "sleep 60 & echo $!; wait")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		p = testenv.Start(t, cmd, bound)
		for deadline := time.Now().Add(bound); !strings.HasSuffix(p.Stdout.String(), "\n"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no child pid printed")
			}
		}
		child, _ = strconv.Atoi(strings.TrimSpace(p.Stdout.String()))
	})
	select {
	case <-p.Done():
	default:
		t.Fatal("the process was not reaped by the cleanup")
	}
	if p.ExitCode() != -1 {
		t.Errorf("exit %d, want -1 (killed)", p.ExitCode())
	}
	for deadline := time.Now().Add(bound); child > 0 && !gone(child); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("pid %d of the group still runs", child)
		}
	}
}

func TestWaitHTTPReturnsTheFirstAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not yet", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	p := testenv.Start(t, exec.Command("sleep", "60"), bound)
	if status, body := p.WaitHTTP(t, srv.URL+"/"); status != http.StatusServiceUnavailable || string(body) != "not yet\n" {
		t.Errorf("%d %q", status, body)
	}
}

func TestFreePort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)))
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}
