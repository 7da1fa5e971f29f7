package mcqa

import (
	"fmt"

	"github.com/gymlens/gymlens/protocol"
)

// Row returns a dataset row for this environment: the user message is
// question followed by one line per option, lettered from A ("A) 140"),
// and an instruction to answer with the letter in \boxed{}; the task
// fields are options, listed as upstream lists them, one one-key object
// per option ([{"A":"140"},{"B":"139"},...]), and expected_answer, the
// letter of options[right]. Row panics unless there are 1 to 26 options
// and right indexes one of them. The row names no agent; the caller adds
// its agent_ref.
func Row(question string, options []string, right int) protocol.RunRequest {
	if len(options) > 26 || right < 0 || right >= len(options) {
		panic(fmt.Sprintf("mcqa: Row with %d options and the right one at %d", len(options), right))
	}
	text := question
	list := make([]map[string]string, len(options))
	for i, o := range options {
		letter := string(rune('A' + i))
		text += fmt.Sprintf("\n%s) %s", letter, o)
		list[i] = map[string]string{letter: o}
	}
	text += "\nAnswer with the letter of the correct option in \\boxed{}."
	row := protocol.RunRequest{ResponsesCreateParams: protocol.ResponseCreateParams{
		Input: protocol.ItemsInput(protocol.UserMessage(text)),
	}}
	_ = row.Fields.Set("options", list)
	_ = row.Fields.Set("expected_answer", string(rune('A'+right)))
	return row
}
