package stringmatch

import "github.com/gymlens/gymlens/protocol"

// Row returns a dataset row for this environment that asks question and
// has the answer written in \boxed{}: the user message is question
// followed by " Answer in \boxed{}.", and the task fields are
// expected_answer and extraction_mode "boxed" (ModeBoxed). The row names
// no agent; the caller adds its agent_ref.
func Row(question, expected string) protocol.RunRequest {
	row := protocol.RunRequest{ResponsesCreateParams: protocol.ResponseCreateParams{
		Input: protocol.ItemsInput(protocol.UserMessage(question + ` Answer in \boxed{}.`)),
	}}
	_ = row.Fields.Set("expected_answer", expected)
	_ = row.Fields.Set("extraction_mode", ModeBoxed)
	return row
}
