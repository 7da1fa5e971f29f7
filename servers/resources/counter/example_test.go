package counter_test

import (
	"encoding/json"
	"fmt"

	"github.com/gymlens/gymlens/servers/resources/counter"
)

// A dataset row for the counter environment: the prompt, the tools and
// the task fields.
func ExampleRow() {
	row := counter.Row(3, 1, 2)
	b, _ := json.Marshal(row)
	fmt.Println(row.ResponsesCreateParams.Input.LastUserText())
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	fmt.Println(string(m["initial_count"]), string(m["expected_count"]), len(row.ResponsesCreateParams.Tools))
	// Output:
	// add 1 then add 2 then get the count
	// 3 6 2
}
