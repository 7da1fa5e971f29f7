// Package legacyproto holds, until the fleet moves to NeMo Gym's protocol, the JSON bodies the fleet's servers exchange: the
// agent's /run, the model's /v1/responses (the subset of the OpenAI
// Responses API the agent uses) and the resources server's /verify.
package legacyproto

import (
	"errors"
	"strings"
)

// Routes of the built-in servers.
const (
	RouteRun       = "POST /run"
	RouteResponses = "POST /v1/responses"
	RouteVerify    = "POST /verify"
)

// Task is one environment task: a question with its expected answer.
type Task struct {
	ID       string `json:"id"`
	Question string `json:"question"`
	Expected string `json:"expected"`
}

// Validate reports a task that cannot be run.
func (t Task) Validate() error {
	if strings.TrimSpace(t.ID) == "" {
		return errors.New("task.id is required")
	}
	if strings.TrimSpace(t.Question) == "" {
		return errors.New("task.question is required")
	}
	return nil
}

// RunRequest asks the agent for one rollout of Task.
type RunRequest struct {
	Task Task `json:"task"`
	// RolloutID is optional; the agent mints one when it is empty.
	RolloutID string `json:"rollout_id,omitempty"`
}

// Validate implements the server runtime's validation hook.
func (r *RunRequest) Validate() error { return r.Task.Validate() }

// RunResponse is the outcome of one rollout. A rollout whose model call or
// verification failed is still answered with 200 and Error set, so the
// collector records it; Reward is then 0.
type RunResponse struct {
	RolloutID  string  `json:"rollout_id"`
	TaskID     string  `json:"task_id"`
	Answer     string  `json:"answer"`
	Reward     float64 `json:"reward"`
	Correct    bool    `json:"correct"`
	Error      string  `json:"error,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	TraceID    string  `json:"trace_id,omitempty"`
}

// InputMessage is one message of a Responses API input list.
type InputMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ResponsesRequest is the subset of the Responses API request the agent
// sends.
type ResponsesRequest struct {
	Model           string         `json:"model,omitempty"`
	Input           []InputMessage `json:"input"`
	Temperature     *float64       `json:"temperature,omitempty"`
	MaxOutputTokens int            `json:"max_output_tokens,omitempty"`
}

// Validate implements the server runtime's validation hook.
func (r *ResponsesRequest) Validate() error {
	if len(r.Input) == 0 {
		return errors.New("input must hold at least one message")
	}
	return nil
}

// OutputContent is one content part of an output message.
type OutputContent struct {
	Type string `json:"type"` // "output_text"
	Text string `json:"text"`
}

// OutputItem is one item of a response's output list.
type OutputItem struct {
	Type    string          `json:"type"` // "message"
	ID      string          `json:"id,omitempty"`
	Role    string          `json:"role"`
	Status  string          `json:"status,omitempty"`
	Content []OutputContent `json:"content"`
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// ResponsesResponse is the subset of a Responses API response the agent
// reads.
type ResponsesResponse struct {
	ID     string       `json:"id"`
	Object string       `json:"object"` // "response"
	Model  string       `json:"model"`
	Status string       `json:"status"` // "completed"
	Output []OutputItem `json:"output"`
	Usage  Usage        `json:"usage"`
}

// OutputText joins the text parts of every output message.
func (r *ResponsesResponse) OutputText() string {
	var b strings.Builder
	for _, item := range r.Output {
		for _, c := range item.Content {
			if c.Type == "output_text" {
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// VerifyRequest asks the resources server to score a model answer.
type VerifyRequest struct {
	Task Task `json:"task"`
	// Answer is the model's output text.
	Answer string `json:"answer"`
}

// Validate implements the server runtime's validation hook.
func (r *VerifyRequest) Validate() error { return r.Task.Validate() }

// VerifyResponse is the verifier's score.
type VerifyResponse struct {
	Reward  float64 `json:"reward"`
	Correct bool    `json:"correct"`
	// Parsed is the answer as the verifier read it.
	Parsed string `json:"parsed"`
}
