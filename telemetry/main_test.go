package telemetry_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test here sets telemetry up and tears it down; none may leave a
// goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
