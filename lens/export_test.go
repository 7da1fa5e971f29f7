package lens

import "testing"

// SetK8sSecretsDirForTest points the Kubernetes service-account check at
// dir until the test ends.
func SetK8sSecretsDirForTest(t testing.TB, dir string) {
	old := k8sSecretsDir
	k8sSecretsDir = dir
	t.Cleanup(func() { k8sSecretsDir = old })
}

// OwnAggregationForTest reports whether h aggregates the contract's
// synchronous instruments itself.
func OwnAggregationForTest(h *Handle) bool { return h.Instrumenter().agg != nil }

// OwnAggregationReasonForTest is ownAggregation with the variables of env.
func OwnAggregationReasonForTest(cfg Config, opts Options, env map[string]string) string {
	return ownAggregation(cfg, opts, func(k string) string { return env[k] })
}
