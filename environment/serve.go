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

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// DefaultAddr is the address Main listens on without -addr.
const DefaultAddr = "127.0.0.1:8000"

// listening, when set (by tests), is told the bound address.
var listening func(net.Addr)

// ListenAndServe runs the environment as this process's server until ctx
// is done: it initialises telemetry (from the NEMO_GYM_OTEL_* variables,
// as a resources server named after the environment; a bad telemetry
// configuration is logged and leaves telemetry off), listens on addr
// ("host:port"; port 0 picks a free one), serves, and on ctx's end stops
// accepting, drains in-flight requests and flushes telemetry. The
// server's timeouts and caps take their defaults unless GYM_SERVER_*
// variables set them (server.Settings; a bad one is an error before it
// listens). It returns nil after a clean shutdown.
func (e *Environment) ListenAndServe(ctx context.Context, addr string) error {
	return e.serve(ctx, addr, e.name, slog.Default())
}

func (e *Environment) serve(ctx context.Context, addr, instance string, log *slog.Logger) error {
	if _, err := telemetry.Init(telemetry.InitOptions{ServerName: instance, ServerType: contract.ServerTypeResources}); err != nil {
		log.Warn("telemetry is off", "err", err)
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), contract.TelemetryFlushTimeout)
		defer cancel()
		if err := telemetry.Shutdown(fctx); err != nil {
			log.Warn("telemetry flush", "err", err)
		}
	}()
	opts := ServerOptions(e.name, instance)
	opts.Name, opts.Addr, opts.Logger = instance, addr, log
	if err := server.ApplyEnv(&opts, os.LookupEnv); err != nil {
		return err
	}
	s := server.New(opts)
	e.Register(s)
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

// Main runs env as a program and exits. Started with flags, or without
// NEMO_GYM_CONFIG_PATH in its environment, it reads the flags -addr
// (listen address, default DefaultAddr) and -name (the instance name in
// the fleet, default the environment's name), logs to stderr, and serves
// as ListenAndServe does until SIGINT or SIGTERM.
//
// Started without arguments and with NEMO_GYM_CONFIG_PATH set, as NeMo
// Gym's launcher (or gymlens env start) starts a server, it follows the
// launch contract: NEMO_GYM_CONFIG_DICT is the fleet's config (YAML,
// interpolations unresolved) and NEMO_GYM_CONFIG_PATH the name of this
// server's instance in it. The instance must be a resources_servers
// block; the instance name names the server (telemetry, the session
// cookie, the log), it binds exactly the block's host:port, and with
// dry_run: true at the top of the config it checks the config and the
// environment and exits 0 without listening. The rest of the block is
// the program's own (see LaunchConfig); the SDK ignores it.
//
// The exit status is 0 after a clean shutdown (or a dry run), 1 when
// serving failed and 2 for bad flags or a bad launch config, reported
// on one line of stderr before anything listens.
//
// A whole environment program is then:
//
//	func main() { environment.Main(environment.New("my_env", environment.Verify(verify))) }
func Main(env *Environment) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env, os.Args[1:], os.LookupEnv, os.Stderr)
	stop()
	os.Exit(code)
}

// LaunchConfig returns this process's own block of the fleet config when
// a fleet's launcher started it (NEMO_GYM_CONFIG_PATH is set): the
// resolved keys of its implementation block (interpolations such as
// ${oc.env:VAR,default} resolved; values from oc.env are strings), less
// the launcher's keys (host, port, entrypoint, command, ...). launched
// is false, with a nil map and error, when the variable is unset. The
// SDK does not check these keys: they are the program's to read and
// validate, for example before building its Environment:
//
//	cfg, launched, err := environment.LaunchConfig()
//	if err != nil {
//		log.Fatal(err)
//	}
//	rule, _ := cfg["grading_rule"].(string) // launched or not
func LaunchConfig() (cfg map[string]any, launched bool, err error) {
	l, ok, err := gymconfig.LaunchFromEnv(os.LookupEnv)
	if err != nil || !ok {
		return nil, false, err
	}
	return l.Self.ImplConfig(), true, nil
}

// run is Main without the process: it returns the exit status.
func run(ctx context.Context, env *Environment, args []string, lookupEnv func(string) (string, bool), stderr io.Writer) int {
	// The runtime's limits (server.Settings) come from the environment;
	// a bad one is a usage error before anything listens.
	if err := server.ApplyEnv(&server.Options{}, lookupEnv); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", env.name, err)
		return 2
	}
	if len(args) == 0 {
		l, launched, err := gymconfig.LaunchFromEnv(lookupEnv)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", env.name, err)
			return 2
		}
		if launched {
			return runLaunched(ctx, env, l, stderr)
		}
	}
	fs := flag.NewFlagSet(env.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", DefaultAddr, "listen address (host:port; port 0 picks a free one)")
	name := fs.String("name", env.name, "instance name in the fleet")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [-addr host:port] [-name instance]\n"+
			"       %s    (with $%s and $%s set, as a fleet's launcher starts it)\n\n"+
			"Serves the %s environment (a NeMo Gym resources server) until SIGINT or SIGTERM.\n\nFlags:\n",
			env.name, env.name, gymconfig.EnvConfigDict, gymconfig.EnvConfigPath, env.name)
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

// runLaunched serves env as the instance l names (the launch contract).
func runLaunched(ctx context.Context, env *Environment, l *gymconfig.Launch, stderr io.Writer) int {
	self := l.Self
	path := self.Name + "." + self.Type + "." + self.Impl
	if self.Type != contract.ServerTypeResources {
		fmt.Fprintf(stderr, "%s: %s: an environment is a %s server, not %s\n", env.name, path, contract.ServerTypeResources, self.Type)
		return 2
	}
	if self.Port() <= 0 || self.Host() == "" {
		fmt.Fprintf(stderr, "%s: %s: the block needs a host and a port to listen on (got host %q, port %d)\n",
			env.name, path, self.Host(), self.Port())
		return 2
	}
	dryRun, err := l.DryRun()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", env.name, err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if dryRun {
		opts := ServerOptions(env.name, self.Name)
		opts.Name, opts.Addr, opts.Logger = self.Name, l.Addr(), log
		env.Register(server.New(opts))
		log.Info("dry run: the configuration is valid; not listening", "environment", env.name, "instance", self.Name, "addr", l.Addr())
		return 0
	}
	if err := env.serve(ctx, l.Addr(), self.Name, log); err != nil {
		log.Error("serve", "err", err)
		return 1
	}
	return 0
}
