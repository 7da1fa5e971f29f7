// Package envtest helps test an environment over real HTTP: it serves
// one on a loopback port, builds valid rows and model responses, and
// plays an agent's session, carrying the session cookie from each answer
// to the next call as NeMo Gym's agent does.
//
//	base := envtest.Serve(t, env)
//	s := envtest.NewSession(t, base)
//	s.Post("/seed_session", envtest.Row("add 2", map[string]any{"initial_count": 1}))
//	status, body := s.Post("/verify", envtest.Verify(row, envtest.Answer("The count is 3.")))
package envtest
