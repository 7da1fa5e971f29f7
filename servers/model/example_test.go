package model_test

import (
	"encoding/json"
	"fmt"

	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/servers/model"
)

// The built-in policy answers arithmetic questions in the format the
// question asks for; with probability 1 it is always right, and it admits
// what it cannot parse.
func ExampleAnswer() {
	fmt.Println(model.Answer(42, 1, "What is 17 + 25?"))
	fmt.Println(model.Answer(42, 1, `What is 6 * -7? Put it in \boxed{}.`))
	fmt.Println(model.Answer(42, 1, "What is 2 + 2? Give only the number."))
	fmt.Println(model.Answer(42, 1, "What is 2 + 2?\nA) 3\nB) 4"))
	fmt.Println(model.Answer(42, 1, "Why is the sky blue?"))
	// Output:
	// The answer is 42.
	// The answer is \boxed{-42}.
	// 4
	// \boxed{B}
	// I don't know
}

// With the counter tools offered, the policy makes one call per turn and
// reports the counter once every call is answered.
func ExampleDecide() {
	tools := []protocol.Tool{
		protocol.FunctionTool(model.CounterIncrementTool, "", json.RawMessage(`{"type":"object"}`)),
		protocol.FunctionTool(model.CounterValueTool, "", json.RawMessage(`{"type":"object"}`)),
	}
	items := []protocol.Item{protocol.UserMessage("Add 2.")}
	turn := model.Decide(0, 1, protocol.ItemsInput(items...), tools)
	fmt.Println(turn.Call.Name, turn.Call.Arguments)

	items = append(items, protocol.FunctionCall("fc_1", "call_1", turn.Call.Name, turn.Call.Arguments),
		protocol.FunctionCallOutput("call_1", `{"success": true}`))
	turn = model.Decide(0, 1, protocol.ItemsInput(items...), tools)
	fmt.Println(turn.Call.Name, turn.Call.Arguments)

	items = append(items, protocol.FunctionCall("fc_2", "call_2", turn.Call.Name, turn.Call.Arguments),
		protocol.FunctionCallOutput("call_2", `{"count": 7}`))
	fmt.Println(model.Decide(0, 1, protocol.ItemsInput(items...), tools).Text)
	// Output:
	// increment_counter {"count": 2}
	// get_counter_value {}
	// The count is 7.
}
