// Command gym is the command-line tool of gymlens.
//
// Usage:
//
//	gym <command> [arguments]
//	gymlens help [command ...]
//
// Commands are organised as a tree: a top-level command may be a group
// whose first argument names a subcommand (gymlens telemetry check). Each
// command parses its own flags with a flag.FlagSet of its own, through
// parseArgs: flags may come before or after the positional arguments a
// command declares, and any other argument is an error, so nothing on the
// command line is ignored. Exit status 2 means a usage error: an unknown
// command (with the nearest one suggested), a bad flag, an argument the
// command does not take, a bad configuration, or a run directory that may
// not be used (an existing one without gymlens run --resume, or one whose
// run.json holds other work); it is given before anything is created.
//
// # gymlens telemetry check
//
//	gymlens telemetry check [--config FILE] [--rank N] [--world-size N]
//	                    [--server-name NAME] [--server-type TYPE] [--json]
//
// check prints the telemetry configuration a Gym process would run with,
// without setting anything up. It reads the optional telemetry: block of
// the YAML file given by --config, lays the environment over it
// (NEMO_GYM_OTEL_<KEY>, falling back to NEMO_LENS_<KEY>, and the standard
// OTEL_* variables), and shows:
//
//   - every setting with its effective value and its source: the variable
//     that set it ("env NEMO_GYM_OTEL_ENABLED"), the YAML key
//     ("yaml telemetry.enabled"), or "default";
//   - the span groups the SPAN_GROUPS setting resolves to, the exporters
//     and the enabled signals;
//   - the service name: OTEL_SERVICE_NAME, followed by "/" and the server
//     name when SERVICE_NAME_PER_SERVER is on and --server-name is given;
//   - the verdict of lens.Decide, the one lens.Setup acts on: whether a
//     process with this rank would export, and if not, the one reason why
//     (telemetry disabled, the export strategy rules the rank out, no
//     signal to export, or a set-up bound to fail).
//
// The rank, world size and local rank come from --rank, --world-size and
// --local-rank, else from RANK, WORLD_SIZE and LOCAL_RANK. With --fleet the
// answer is for a process of a fleet started by gymlens run, with gymlens run's
// defaults. With --json the same report is printed as a single JSON object.
//
// The exit status is 0 for a valid configuration whether or not it
// exports, and 2 when the configuration or the flags are bad; each problem
// is then printed on a line of its own on stderr, naming the variable (or
// YAML key) and the offending value.
package main
