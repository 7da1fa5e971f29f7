package interop

import (
	"fmt"
	"os"
	"testing"

	"github.com/gymlens/gymlens/internal/testenv"
)

// gymBin is gymlens's gym binary, built once for the whole test binary.
var gymBin string

func TestMain(m *testing.M) {
	bin, remove, err := testenv.BuildGym("gymlens-interop-", "../cmd/gymlens")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gymBin = bin
	code := m.Run()
	remove()
	os.Exit(code)
}
