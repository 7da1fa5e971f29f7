// Package gymconfig reads NeMo Gym's global config dict: the YAML document
// a fleet hands every server process in NEMO_GYM_CONFIG_DICT.
//
// Parse keeps the document unresolved (interpolations such as
// ${policy_api_key} or ${oc.env:VAR,default} stay text), so YAML can hand
// it on to children the way upstream does. Resolve evaluates the
// interpolations with OmegaConf's rules and finds the server instances:
// top-level keys shaped {<server type>: {<impl>: {...}}}. Defaults fills
// what upstream's parser fills before it spawns servers (hosts, random free
// ports, the head server, disallowed_ports) and LauncherDefaults the rest
// of what it writes (dry_run, the timeouts, the directories), which NeMo
// Gym's Python servers read. FrontAgents gives every agent no environment
// server names a generated legacy_agent relay, as upstream's parser does
// (NeMo Gym 0.7 reaches agents only through environment servers). Lazy
// resolves on demand,
// with the same rules: one instance's block, one key path, a peer's host
// and port, so a value nobody reads cannot fail. LaunchFromEnv is a server
// process's view of the launch contract: the instance named by
// NEMO_GYM_CONFIG_PATH, its block resolved, and the rest of the config
// resolved lazily, as NeMo Gym's servers read it.
//
// Errors name the dotted key path they concern and, for unknown names, the
// nearest known one (see Nearest).
package gymconfig
