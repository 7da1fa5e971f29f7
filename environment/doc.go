// Package environment is the SDK for writing a NeMo Gym environment in
// Go: a resources server that a NeMo Gym agent (gymlens's or upstream's
// Python one) seeds, calls tools on and asks to score each rollout.
//
// An environment is a verify function and, optionally, tools and
// per-session state:
//
//	type Task struct {
//		Expected string `json:"expected_answer" gym:"required"`
//	}
//
//	env := environment.New("exact_match",
//		environment.Verify(func(ctx context.Context, req *environment.VerifyRequest, t Task) (environment.Score, error) {
//			got := strings.TrimSpace(req.Response.OutputText())
//			reward := 0.0
//			if got == t.Expected {
//				reward = 1
//			}
//			return environment.Score{Reward: reward}.With("extracted_answer", got), nil
//		}))
//	environment.Main(env)
//
// An environment program needs no other package of this module: the
// bodies its functions get (VerifyRequest, SeedSessionRequest), the
// members a score adds and a ComputeMetrics hook reads (Fields), the
// errors that answer with a status (Error, Errorf) and the reverify
// modes are named here, as aliases of the protocol and server packages'
// own, so values pass between the packages unconverted.
//
// The SDK owns the protocol. Bodies are decoded and validated as
// upstream's pydantic models are (a FastAPI 422 naming each bad member,
// before any user code runs); task fields are decoded into the user's
// type with upstream's extra=ignore rule, while the response echoes every
// member of the request, declared or not, so nothing a dataset row
// carries is lost on the way to the results file; every response sets
// the session cookie; /ng-rollout/<id>/ paths route like their plain
// twins.
//
// Routes of an environment's server:
//
//	POST /seed_session       Seed's function, per rollout; {} back
//	POST /verify             the Verify function; request echoed + reward + Score.Fields
//	POST /aggregate_metrics  statistics of verify results (AggregateMetrics, ComputeMetrics)
//	GET  /reverify_mode      "unknown" unless ReverifyMode says otherwise
//	POST /<tool>             each Tool; its result is the tool output the model sees
//	GET  /                   {"status":"ok"}
//
// Call flow of one verification:
//
//	runtime:  decode + validate the VerifyRequest ─► 422, nothing recorded
//	SDK:      decode the task into T             ─► 422, nothing recorded
//	          [gym.verify span: nemo.gym.server.name, nemo.gym.rollout.id]
//	          fn(ctx, req, task) ─► Score         (Errorf ─► its status, other error or panic ─► 500)
//	          metrics.RecordVerify(duration, completed)   exactly once
//	          reward on the span; response = request echoed + reward + fields
//
// "Completed" is about the verifier, not the model: a wrong answer
// scored 0 is a successful verification, a verify function that errors
// or panics is a failed one. A panic is answered 500 and the process
// keeps serving. The span is gated on the verify span group and the
// metric on telemetry exporting metrics, as the telemetry package
// documents; with telemetry off both cost one check.
//
// Sessions: upstream's agent calls /seed_session, then every tool, then
// /verify with the cookie the previous answer set, so a cookie names one
// rollout. Sessions[S] keeps a state per cookie, bounded in time and
// number. Tools and verify read it with the request's ctx.
//
// Run an environment with Main (flags or NeMo Gym's launch contract,
// signals, telemetry), ListenAndServe (the same under a caller's
// context), Register (its routes on a server.Server built with
// ServerOptions(env.Name(), instance), as gymlens serve does for the
// built-in environments) or Handler (tests).
//
// Started by a fleet's launcher: NeMo Gym's launcher (and gymlens env start,
// for a fleet block with a command: list) starts a server with no
// arguments and two environment variables, NEMO_GYM_CONFIG_DICT (the YAML
// of the whole fleet config, interpolations unresolved) and
// NEMO_GYM_CONFIG_PATH (the name of the server's instance in it). Main
// then resolves the config, binds exactly its block's host:port, names
// the server after the instance, exits 0 without listening under
// dry_run: true and exits 2 with one line on stderr for a bad launch.
// The block's other keys are the program's: LaunchConfig returns them,
// and the SDK never refuses one. For example, a fleet config
//
//	wallet:
//	  resources_servers:
//	    wallet:
//	      command: [./wallet]
//	      fee: ${oc.env:WALLET_FEE,0}
//
// starts ./wallet with NEMO_GYM_CONFIG_PATH=wallet, and LaunchConfig
// returns {"fee": "0"} there (values from oc.env are strings).
package environment
