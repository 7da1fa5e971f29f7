package arithmetic_test

import (
	"fmt"

	"github.com/gymlens/gymlens/servers/resources/arithmetic"
)

// The verifier reads the last number of an answer, whatever text is around
// it.
func ExampleLastNumber() {
	for _, answer := range []string{"The answer is 7.", "17 + 25 = 42", "about 1,250.5 meters", "no idea"} {
		n, ok := arithmetic.LastNumber(answer)
		fmt.Printf("%q %v\n", n, ok)
	}
	// Output:
	// "7" true
	// "42" true
	// "1250.5" true
	// "" false
}
