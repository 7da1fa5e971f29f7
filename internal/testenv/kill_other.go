//go:build !unix

package testenv

import "os/exec"

// kill kills the started cmd by its PID.
func kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
