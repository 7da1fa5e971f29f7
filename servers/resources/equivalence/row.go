package equivalence

import "github.com/gymlens/gymlens/protocol"

// Row returns a dataset row for this environment that asks question and
// wants the bare answer: the user message is question followed by
// " Reply with only the number.", and the task field is expected_answer.
// The row names no agent; the caller adds its agent_ref.
func Row(question, expected string) protocol.RunRequest {
	row := protocol.RunRequest{ResponsesCreateParams: protocol.ResponseCreateParams{
		Input: protocol.ItemsInput(protocol.UserMessage(question + " Reply with only the number.")),
	}}
	_ = row.Fields.Set("expected_answer", expected)
	return row
}
