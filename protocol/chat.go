package protocol

import "bytes"

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
			"type!", lit("function"), "name", anyShape),
		object(true, "id!", strShape, "custom!", object(true, "input!", strShape, "name!", strShape),
			"type!", lit("custom"), "name", anyShape))
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
				"timezone", strShape), "type!", lit("approximate"))))), "stream", &shape{kind: shapeAny, pre: preMessage(notStreaming)},
		"chat_template_kwargs", optObjAny, "thinking", optObjAny, "output_config", optObjAny)
)

// notStreaming accepts stream only as false or null (Literal[False]).
func notStreaming(raw []byte) string {
	switch string(raw) {
	case "false", "null":
		return skipCheck
	}
	return "Input should be False"
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
