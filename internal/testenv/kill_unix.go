//go:build unix

package testenv

import (
	"os/exec"
	"syscall"
)

// kill sends SIGKILL to the started cmd by its PID, or to its whole
// process group when cmd.SysProcAttr sets Setpgid.
func kill(cmd *exec.Cmd) {
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return
	}
	_ = cmd.Process.Kill()
}
