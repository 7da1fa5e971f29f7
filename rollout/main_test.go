package rollout_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: agent
// servers, workers, progress tickers and client connections must all stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
