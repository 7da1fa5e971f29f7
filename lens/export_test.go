package lens

import "testing"

// SetK8sSecretsDirForTest points the Kubernetes service-account check at
// dir until the test ends.
func SetK8sSecretsDirForTest(t testing.TB, dir string) {
	old := k8sSecretsDir
	k8sSecretsDir = dir
	t.Cleanup(func() { k8sSecretsDir = old })
}
