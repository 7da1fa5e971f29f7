package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// ChatParamKeys lists every member of a POST /v1/chat/completions body
// NeMo Gym accepts (NeMoGymChatCompletionCreateParamsNonStreaming, which
// forbids any other), in upstream's declaration order: the OpenAI
// parameters, then the provider extensions chat_template_kwargs,
// thinking and output_config.
var ChatParamKeys = []string{"messages", "model", "audio", "frequency_penalty", "logit_bias", "logprobs",
	"max_completion_tokens", "max_tokens", "metadata", "moderation", "modalities", "n", "parallel_tool_calls",
	"prediction", "presence_penalty", "prompt_cache_key", "prompt_cache_retention", "reasoning_effort",
	"response_format", "seed", "safety_identifier", "service_tier", "stop", "store", "stream_options",
	"temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
	"stream", "chat_template_kwargs", "thinking", "output_config"}

// ValidateChatParams checks the body of POST /v1/chat/completions (b,
// valid JSON) as upstream's model does: the members above and no others,
// each message one of the message TypedDicts (which forbid members they
// do not declare, as the model does), the tools and the tool choice of
// their forms, nested TypedDicts (audio, response_format, web search
// options, a custom tool's format) member by member, and stream false or
// unset. The error is a *ValidationError whose
// locations are relative to the body.
func ValidateChatParams(b []byte) error {
	var v validator
	chatParams.check(&v, b, nil)
	return v.err()
}

// NormalizeChatParams returns the members of a chat request b (valid
// JSON that ValidateChatParams accepts) as upstream's model server
// forwards them, body.model_dump(exclude_unset=True)
// (responses_api_models/openai_model/app.py:100): the members that
// arrived, each value as the model holds it once validated ("5" as 5 for
// an integer, "yes" and 1 as true, 0 as false for stream), a repeated
// member once, by its last value, a tool call's outer name dropped.
func NormalizeChatParams(b []byte) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	_ = json.Unmarshal(chatParams.normalize(nil, b), &out)
	return out
}

// Shapes of the chat request, from openai 2.44's TypedDicts as NeMo Gym
// narrows them.
var (
	chatText     = object(true, "text!", strShape, "type!", lit("text"))
	chatTextList = listOf(chatText)
	chatPart     = union(chatText,
		object(true, "image_url!", object(true, "url!", strShape, "detail", lit("auto", "low", "high")), "type!", lit("image_url")),
		object(true, "type!", lit("input_audio"), "input_audio!", object(true, "data!", strShape, "format!", strShape)),
		object(true, "file!", object(true, "file_data", strShape, "file_id", strShape, "filename", strShape), "type!", lit("file")),
		object(true, "video_url!", strOrObjAny, "type!", lit("video_url")))
	chatToolCall = union(
		// upstream drops a redundant outer name before validating a call.
		object(true, "id!", strShape, "function!", object(true, "arguments!", strShape, "name!", strShape),
			"type!", lit("function"), "name", stripped),
		object(true, "id!", strShape, "custom!", object(true, "input!", strShape, "name!", strShape),
			"type!", lit("custom"), "name", stripped))
	chatAssistantFields = []any{"role!", lit("assistant"), "audio", nullable(object(true, "id!", strShape)),
		"content", nullable(union(strShape, listOf(union(chatText, object(true, "refusal!", strShape, "type!", lit("refusal")))))),
		"function_call", nullable(object(true, "arguments!", strShape, "name!", strShape)), "name", strShape,
		"refusal", optStr, "tool_calls", nullable(listOf(chatToolCall)), "reasoning_content", optStr}
	chatMessage = &shape{kind: shapeUnion, pre: chatTokenCheck, branches: []*shape{
		object(true, "content!", union(strShape, chatTextList), "role!", lit("developer"), "name", strShape),
		object(true, "content!", union(strShape, chatTextList), "role!", lit("system"), "name", strShape),
		object(true, "content!", union(strShape, listOf(chatPart)), "role!", lit("user"), "name", strShape),
		object(true, chatAssistantFields...),
		object(true, "content!", union(strShape, chatTextList), "role!", lit("tool"), "tool_call_id!", strShape),
		object(true, append(append([]any{}, chatAssistantFields...), "prompt_token_ids!", listOf(intShape),
			"generation_token_ids!", listOf(intShape), "generation_log_probs!", listOf(floatShape),
			// Unlike the Responses items', the chat mixin's routed_experts
			// may be left out but not null.
			"routed_experts", union(strShape, listOf(listOf(listOf(intShape)))))...),
	}}
	chatTool = union(
		object(true, "function!", object(true, "name!", strShape, "description", strShape, "parameters", objAny, "strict", optBool),
			"type!", lit("function")),
		object(true, "custom!", object(true, "name!", strShape, "description", strShape, "format", union(object(true, "type!", lit("text")),
			object(true, "grammar!", object(true, "definition!", strShape, "syntax!", lit("lark", "regex")), "type!", lit("grammar")))),
			"type!", lit("custom")))
	chatToolChoice = union(lit("none", "auto", "required"),
		object(true, "allowed_tools!", object(true, "mode!", lit("auto", "required"), "tools!", iterableShape), "type!", lit("allowed_tools")),
		object(true, "function!", object(true, "name!", strShape), "type!", lit("function")),
		object(true, "custom!", object(true, "name!", strShape), "type!", lit("custom")))
	chatParams = object(true, "messages!", listOf(chatMessage), "model", optStr, "audio", nullable(object(true, "format!", lit("wav", "aac", "mp3", "flac", "opus", "pcm16"),
		"voice!", union(strShape, object(true, "id!", strShape)))),
		"frequency_penalty", optFloat, "logit_bias", nullable(&shape{kind: shapeDict, elem: intShape}), "logprobs", optBool,
		"max_completion_tokens", optInt, "max_tokens", optInt, "metadata", nullable(strMapShape),
		"moderation", nullable(object(true, "model!", strShape)), "modalities", nullable(listOf(lit("text", "audio"))),
		"n", optInt, "parallel_tool_calls", boolShape,
		"prediction", nullable(object(true, "content!", union(strShape, chatTextList), "type!", lit("content"))),
		"presence_penalty", optFloat, "prompt_cache_key", optStr, "prompt_cache_retention", optLit("in_memory", "24h"),
		"reasoning_effort", optLit("none", "minimal", "low", "medium", "high", "xhigh"), "response_format", nullable(union(object(true, "type!", lit("text")),
			object(true, "json_schema!", object(true, "name!", strShape, "description", strShape, "schema", objAny), "type!", lit("json_schema")),
			object(true, "type!", lit("json_object")))),
		"seed", optInt, "safety_identifier", optStr, "service_tier", optLit("auto", "default", "flex", "scale", "priority"),
		"stop", nullable(union(strShape, listOfStr)), "store", optBool,
		"stream_options", nullable(object(true, "include_obfuscation", boolShape, "include_usage", boolShape)),
		"temperature", optFloat, "tool_choice", nullable(chatToolChoice), "tools", nullable(listOf(chatTool)),
		"top_logprobs", optInt, "top_p", optFloat, "user", optStr, "verbosity", optLit("low", "medium", "high"),
		"web_search_options", nullable(object(true, "search_context_size", lit("low", "medium", "high"),
			"user_location", nullable(object(true, "approximate!", object(true, "city", strShape, "country", strShape, "region", strShape,
				"timezone", strShape), "type!", lit("approximate"))))), "stream", &shape{kind: shapeBool, nullable: true, pre: preMessage(notStreaming)},
		"chat_template_kwargs", optObjAny, "thinking", optObjAny, "output_config", optObjAny)
)

// notStreaming accepts stream only as Literal[False] takes it in lax
// mode: false, null, or a number equal to 0 (Python's 0 == False).
func notStreaming(raw []byte) string {
	if string(raw) == "false" || isNull(raw) || zeroNumber(raw) {
		return skipCheck
	}
	return "Input should be False"
}

// zeroNumber reports whether raw is a JSON number equal to 0.
func zeroNumber(raw []byte) bool {
	if len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return err == nil && f == 0
}

// falseFlag is a stream flag of a Responses request: a boolean, or a
// number equal to 0, which Literal[False] takes as False (Validate
// refuses true).
type falseFlag bool

func (f *falseFlag) decodeRaw(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case isNull(b):
		return nil // null leaves the zero value, as encoding/json does
	case string(b) == "true":
		*f = true
	case string(b) == "false" || zeroNumber(b):
		*f = false
	default:
		return &json.UnmarshalTypeError{Value: rawKind(b), Type: typeBool}
	}
	return nil
}

// chatTokenCheck is upstream's check of a message's token members before
// the message union (_validate_atomic_token_metadata,
// nemo_gym/openai_utils.py:192): if any is present, the three required
// ones must all be (an error at the message), and each must have its
// type (errors at the member, as TokenIDLogProbMixin reports them).
func chatTokenCheck(raw []byte) []FieldError {
	if !bytes.Contains(raw, []byte("_token_ids")) && !bytes.Contains(raw, []byte("log_probs")) && !bytes.Contains(raw, []byte("routed_experts")) {
		return nil
	}
	var msg Fields
	if raw[0] != '{' || msg.UnmarshalJSON(raw) != nil {
		return nil
	}
	it := Item{Extra: msg}
	var v validator
	if it.validateTokens(&v, nil) {
		return nil
	}
	return v.errs
}

// ValidateChatCompletion checks a chat completion (b, valid JSON) as
// upstream's model server checks the answer of the endpoint it forwards
// to (NeMoGymChatCompletion.model_validate,
// responses_api_models/openai_model/app.py:104): openai 2.44's
// ChatCompletion, member by member and nested models included, whose
// choices' messages may carry token ids. Undeclared members are kept,
// as the models allow them. The error is a *ValidationError whose
// locations are relative to the body.
func ValidateChatCompletion(b []byte) error {
	var v validator
	chatCompletionShape.check(&v, b, nil)
	return v.err()
}

// Shapes of the chat completion, from openai/types/chat/chat_completion.py,
// chat_completion_message.py and completion_usage.py of openai 2.44, as
// nemo_gym/openai_utils.py:1001-1020 narrows them.
var (
	chatTopLogprob   = object(false, "token!", strShape, "bytes", nullable(listOf(intShape)), "logprob!", floatShape)
	chatTokenLogprob = object(false, "token!", strShape, "bytes", nullable(listOf(intShape)), "logprob!", floatShape,
		"top_logprobs!", listOf(chatTopLogprob))
	chatModerationVerdict = union(
		object(false, "model!", strShape, "results!", listOf(object(false,
			"categories!", &shape{kind: shapeDict, elem: boolShape},
			"category_applied_input_types!", &shape{kind: shapeDict, elem: listOf(lit("text", "image"))},
			"category_scores!", &shape{kind: shapeDict, elem: floatShape}, "flagged!", boolShape, "model!", strShape,
			"type!", lit("moderation_result"))), "type!", lit("moderation_results")),
		object(false, "code!", strShape, "message!", strShape, "type!", lit("error")))
	chatFunction      = object(false, "arguments!", strShape, "name!", strShape)
	chatAnswerMessage = object(false, "content", optStr, "refusal", optStr, "role!", lit("assistant"),
		"annotations", nullable(listOf(object(false, "type!", lit("url_citation"), "url_citation!", object(false,
			"end_index!", intShape, "start_index!", intShape, "title!", strShape, "url!", strShape)))),
		"audio", nullable(object(false, "id!", strShape, "data!", strShape, "expires_at!", intShape, "transcript!", strShape)),
		"function_call", nullable(chatFunction),
		"tool_calls", nullable(listOf(union(
			object(false, "id!", strShape, "function!", chatFunction, "type!", lit("function")),
			object(false, "id!", strShape, "custom!", object(false, "input!", strShape, "name!", strShape), "type!", lit("custom"))))))
	chatCompletionShape = object(false, "id!", strShape, "choices!", listOf(object(false,
		"finish_reason!", lit("stop", "length", "tool_calls", "content_filter", "function_call"), "index!", intShape,
		"logprobs", nullable(object(false, "content", nullable(listOf(chatTokenLogprob)), "refusal", nullable(listOf(chatTokenLogprob)))),
		// The message, or its training variant, after upstream's token check.
		"message!", &shape{kind: shapeUnion, pre: chatTokenCheck, branches: []*shape{chatAnswerMessage, withTokens(chatAnswerMessage)}})),
		"created!", intShape, "model!", strShape, "object!", lit("chat.completion"),
		"moderation", nullable(object(false, "input!", chatModerationVerdict, "output!", chatModerationVerdict)),
		"service_tier", optLit("auto", "default", "flex", "scale", "priority"), "system_fingerprint", optStr,
		"usage", nullable(object(false, "completion_tokens!", intShape, "prompt_tokens!", intShape, "total_tokens!", intShape,
			"completion_tokens_details", nullable(object(false, "accepted_prediction_tokens", optInt, "audio_tokens", optInt,
				"reasoning_tokens", optInt, "rejected_prediction_tokens", optInt)),
			"prompt_tokens_details", nullable(object(false, "audio_tokens", optInt, "cached_tokens", optInt)))))
)
