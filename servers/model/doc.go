// Package model is the built-in "policy_model" model server: the subset of
// the OpenAI Responses API the agent uses, at POST /v1/responses.
//
// It runs in one of two modes, chosen by configuration:
//
//	builtin   (default) a deterministic arithmetic policy, so a whole
//	          fleet runs offline: it reads "What is 17 + 25?" from the
//	          last user message and answers right with probability
//	          CorrectProbability, else with a nearby wrong number. The
//	          draw is seeded from (Seed, message text), so the same
//	          question under the same seed always gets the same answer.
//	upstream  (Upstream.BaseURL set) each request is translated to an
//	          OpenAI-compatible POST <base>/v1/chat/completions with a
//	          bearer key, and the first choice is mapped back.
//
// One request is one gym.model.responses span (model_call group) carrying
// the model name, token usage and mode, never prompt or output text. In
// upstream mode the API key stays out of logs, errors and spans; upstream
// URLs are reported without query string or credentials.
package model
