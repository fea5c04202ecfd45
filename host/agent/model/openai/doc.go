// Package openai implements model.Client for OpenAI-compatible services:
// Chat for the Chat Completions API and Responses for the Responses API,
// both through the official Go SDK (github.com/openai/openai-go/v3). Any
// server that speaks these APIs (OpenAI, vLLM, llama.cpp, Ollama) is reached
// by setting Options.BaseURL.
//
// Mapping between abi messages and the APIs:
//
//	abi                         Chat Completions            Responses
//	system / user text          system / user message       message item (role system / user)
//	assistant text              assistant content           message item (role assistant)
//	assistant function_call     assistant tool_calls        function_call item
//	function_result (any role)  one tool message per call   function_call_output item
//	reasoning, usage parts      not sent                    not sent
//
// A function_result's output is its Result (a JSON string is sent
// unquoted) or, on failure, "error: " followed by its Error.
//
// ChatMessages is the Chat Completions mapping itself, exported so that a
// history exported for another framework is exactly what the client sends;
// FromChatMessage maps one message back (package host/portable uses both).
//
// Request.Store nil means the store field is not sent at all, so the service
// applies its own default; Responses stores by default and so implements
// model.HistoryStorer. Request.ConversationID becomes the Responses
// previous_response_id, and the id of a stored response comes back as
// Response.ConversationID; a Conversations API id (conv_...) is sent as
// conversation instead and comes back unchanged. Chat Completions keeps no conversation, so Chat
// refuses a request that carries a ConversationID (ErrNoConversations):
// such an id reaching it means a caller-local id leaked.
//
// Nothing is read from the environment: the caller passes the key and base
// URL in Options (the command-line tool reads OPENAI_API_KEY).
//
// Streams yield text deltas as they arrive and each function call once,
// whole, when its arguments are complete. A consumer that stops early closes
// the HTTP response, releasing the connection.
package openai
