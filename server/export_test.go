package server

// Uninstrumented returns opts with the benchmark baseline set: the server
// New builds from them installs no ingress instrumentation. Only this
// package's tests can reach it.
func Uninstrumented(opts Options) Options {
	opts.uninstrumented = true
	return opts
}
