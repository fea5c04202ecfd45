// Package openaitest runs strict fake OpenAI-compatible servers on loopback
// for tests: Chat Completions (POST /v1/chat/completions) and Responses
// (POST /v1/responses), both non-streaming and streaming (server-sent events).
//
// The fakes enforce the rules the real service enforces and answer 400 with
// an OpenAI-style error body when a request breaks them, so a test that
// passes against the fake does not fail on the first real call:
//
//   - Chat: roles are system, developer, user, assistant or tool; an
//     assistant message with tool_calls must be followed, before the next
//     non-tool message, by one tool message per tool_call_id (in any order);
//     a tool message must answer a call of the preceding assistant message.
//   - Responses: an unknown or unstored previous_response_id is an error;
//     a function_call_output must reference a function call that is in the
//     context (the previous response chain or earlier in the input); every
//     function call in the context must have its output; a response is kept
//     for continuation only when store is not false; previous_response_id and
//     conversation are mutually exclusive.
//
// Every request is recorded raw, so a test can assert exactly what reached
// the model (that a field is absent, that a sentinel id never appears).
// Replies are scripted: queue them with Enqueue, or answer with a Handler.
//
// ValidateChatMessages and ValidateHistory check a message history against
// the chat ordering rules without HTTP.
package openaitest
