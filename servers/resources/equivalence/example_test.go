package equivalence_test

import (
	"fmt"

	"github.com/gymlens/gymlens/servers/resources/equivalence"
)

func ExampleScore() {
	task := equivalence.Task{ExpectedAnswer: "Paris is the capital of France"}
	// The output_text parts of the response, in order; they are joined
	// with no separator.
	texts := []string{"PARIS is the capital ", "of   Germany"}
	for _, rule := range equivalence.Rules() {
		res, err := equivalence.Score(equivalence.Config{GradingRule: rule}, task, texts)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-18s %.4f %v\n", rule, res.Reward, res.Fields())
	}
	// Output:
	// exact              0.0000 map[equivalence_score:0]
	// seq_match          0.8852 map[equivalence_score:0.8852459016393442]
	// weighted_seq_match 0.9025 map[equivalence_score:0.9024590163934426]
}

func ExampleRatio() {
	fmt.Println(equivalence.Ratio("abcd", "bcde"))
	fmt.Println(equivalence.Ratio("tide", "diet"), equivalence.Ratio("diet", "tide"))
	// Output:
	// 0.75
	// 0.25 0.5
}
