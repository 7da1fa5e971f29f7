package server

// Uninstrumented returns opts with the benchmark baseline set: the server
// New builds from them installs no ingress instrumentation. Only this
// package's tests can reach it.
func Uninstrumented(opts Options) Options {
	opts.uninstrumented = true
	return opts
}

// OpenConns returns how many connections s's connection cap holds open,
// or -1 without a cap.
func OpenConns(s *Server) int {
	s.mu.Lock()
	c := s.conns
	s.mu.Unlock()
	if c == nil {
		return -1
	}
	return c.Open()
}

// Estimate returns what the decoded-size budget charges for body.
func Estimate(body []byte) int64 {
	b := decodeBudget{}
	return int64(len(body)) + b.scan(body)
}
