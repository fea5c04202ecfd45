// Package portable reads and writes a whole conversation as one
// self-contained document: the session's own fields (id, revision, service
// conversation, pending tool calls, recent runs, provenance) and, for every
// state slot, the plugin that held it and its whole stored history as
// messages (schemas/portable-session.json). Plugin state is not part of it:
// history is what is portable, and an import rebuilds each slot's state
// through a plugin, so a conversation can change plugin and store too.
//
// Both directions stream. A Writer takes the session, then each slot's
// messages one by one, as a plugin's list pages deliver them; a Reader
// yields the session, then each slot and its messages one by one (or in
// pages, to hand to a plugin page by page), the slots in the order the
// document holds them, which may be any. Neither holds more than one
// message, so a 100,000-message session moves in memory bounded by its
// largest message, in time linear in its size (BENCHMARKS.md).
//
// Everything read is checked as it streams: the layout, the format
// version, each message against schemas/message.json, the totals written
// at the end. A document that fails is refused with an *Error that says
// which slot and which message, wrapping one of ErrMalformed, ErrVersion,
// ErrInvalidMessage, ErrTruncated or ErrTooLarge. A caller that imports
// commits nothing until the Reader's Slots loop has ended without error.
// Checking a message can take seconds (one of 300,000 parts, about 9 s):
// NewReaderContext and ReadOpenAIContext check under the caller's context,
// and a read the context ended fails with its cause, never as the
// document's fault. Reading a value is bounded by Limits, not by the
// context: an OpenAI message is decoded into the OpenAI library's types
// before its check, about 3 s for one of 8 MiB.
//
// WriteOpenAI and ReadOpenAI convert a history to and from an OpenAI Chat
// Completions messages array, the interchange format with other
// frameworks, through the mapping the Chat client itself uses
// (package host/agent/model/openai).
package portable
