package model_test

import (
	"fmt"

	"github.com/gymlens/gymlens/servers/model"
)

// The built-in policy answers arithmetic questions; with probability 1 it
// is always right, and it admits what it cannot parse.
func ExampleAnswer() {
	fmt.Println(model.Answer(42, 1, "What is 17 + 25?"))
	fmt.Println(model.Answer(42, 1, "What is 6 * -7?"))
	fmt.Println(model.Answer(42, 1, "Why is the sky blue?"))
	// Output:
	// The answer is 42.
	// The answer is -42.
	// I don't know
}
