package arithmetic

import "github.com/gymlens/gymlens/protocol"

// Row returns a dataset row for this environment: question as the one
// user message, and the task fields task_id (when taskID is not empty)
// and expected_answer, the exact result written as a number. The row
// names no agent; the caller adds its agent_ref.
func Row(taskID, question, expected string) protocol.RunRequest {
	row := protocol.RunRequest{ResponsesCreateParams: protocol.ResponseCreateParams{
		Input: protocol.ItemsInput(protocol.UserMessage(question)),
	}}
	if taskID != "" {
		_ = row.Fields.Set("task_id", taskID)
	}
	_ = row.Fields.Set(FieldExpectedAnswer, expected)
	return row
}
