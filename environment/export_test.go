package environment

import (
	"context"
	"io"
	"net"
	"time"
)

// SetClock makes s read the time from now (tests move it by hand).
func SetClock[S any](s *Sessions[S], now func() time.Time) { s.now = now }

// SetListening sets the hook told the address ListenAndServe and Main
// bind; nil removes it.
func SetListening(fn func(net.Addr)) { listening = fn }

// Run is Main without the process.
func Run(ctx context.Context, env *Environment, args []string, stderr io.Writer) int {
	return run(ctx, env, args, func(string) (string, bool) { return "", false }, stderr)
}

// RunWithEnv is Main without the process, reading the launch variables
// with lookupEnv.
func RunWithEnv(ctx context.Context, env *Environment, args []string, lookupEnv func(string) (string, bool), stderr io.Writer) int {
	return run(ctx, env, args, lookupEnv, stderr)
}
