package interop

import (
	"os"
	"testing"

	"github.com/gymlens/gymlens/internal/testenv"
)

// gymBin is gymlens's gym binary, built once for the whole test binary.
var gymBin string

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithGym(m, "gymlens-interop-", "../cmd/gymlens", &gymBin))
}
