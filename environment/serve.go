package environment

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// DefaultAddr is the address Main listens on without -addr.
const DefaultAddr = "127.0.0.1:8000"

// telemetryFlushTimeout bounds the final flush of telemetry.
const telemetryFlushTimeout = 10 * time.Second

// listening, when set (by tests), is told the bound address.
var listening func(net.Addr)

// ListenAndServe runs the environment as this process's server until ctx
// is done: it initialises telemetry (from the NEMO_GYM_OTEL_* variables,
// as a resources server named after the environment; a bad telemetry
// configuration is logged and leaves telemetry off), listens on addr
// ("host:port"; port 0 picks a free one), serves, and on ctx's end stops
// accepting, drains in-flight requests and flushes telemetry. It returns
// nil after a clean shutdown.
func (e *Environment) ListenAndServe(ctx context.Context, addr string) error {
	return e.serve(ctx, addr, e.name, slog.Default())
}

func (e *Environment) serve(ctx context.Context, addr, instance string, log *slog.Logger) error {
	if _, err := telemetry.Init(telemetry.InitOptions{ServerName: instance, ServerType: telemetry.ServerTypeResources}); err != nil {
		log.Warn("telemetry is off", "err", err)
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), telemetryFlushTimeout)
		defer cancel()
		if err := telemetry.Shutdown(fctx); err != nil {
			log.Warn("telemetry flush", "err", err)
		}
	}()
	opts := e.ServerOptions(instance)
	opts.Name, opts.Addr, opts.Logger = instance, addr, log
	s := server.New(opts)
	if err := e.Register(s); err != nil {
		return err
	}
	bound, err := s.Listen()
	if err != nil {
		return err
	}
	log.Info("serving", "environment", e.name, "instance", instance, "addr", bound.String())
	if listening != nil {
		listening(bound)
	}
	if err := s.Serve(ctx); err != nil {
		return err
	}
	log.Info("stopped", "environment", e.name, "instance", instance)
	return nil
}

// Main runs env as a program and exits: it reads the flags -addr (listen
// address, default DefaultAddr) and -name (the instance name in the
// fleet, default the environment's name), logs to stderr, and serves as
// ListenAndServe does until SIGINT or SIGTERM. The exit status is 0
// after a clean shutdown, 1 when serving failed and 2 for bad flags.
//
// A whole environment program is then:
//
//	func main() { environment.Main(environment.New("my_env", environment.Verify(verify))) }
func Main(env *Environment) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// run is Main without the process: it returns the exit status.
func run(ctx context.Context, env *Environment, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(env.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", DefaultAddr, "listen address (host:port; port 0 picks a free one)")
	name := fs.String("name", env.name, "instance name in the fleet")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [-addr host:port] [-name instance]\n\n"+
			"Serves the %s environment (a NeMo Gym resources server) until SIGINT or SIGTERM.\n\nFlags:\n",
			env.name, env.name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", env.name, fs.Args())
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := env.serve(ctx, *addr, *name, log); err != nil {
		log.Error("serve", "err", err)
		return 1
	}
	return 0
}
