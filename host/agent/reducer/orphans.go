package reducer

import "github.com/wasmhist/wasmhist/abi"

// StripOrphans returns msgs without tool calls that have no result in msgs
// and without tool results that have no call in msgs, so the history can be
// replayed to a service that enforces call/result pairing.
//
// An assistant message that loses its calls keeps its text, metadata and
// media; one left with no text at all (a pure tool-call frame) is dropped,
// since it carries nothing a later turn needs. A tool message left with no
// result is dropped. Messages that need no change are returned as they are;
// msgs itself is never modified.
func StripOrphans(msgs []abi.Message) []abi.Message {
	return strip(make([]abi.Message, 0, len(msgs)), msgs, true)
}

// AppendStripOrphans appends what StripOrphans returns for msgs to dst.
// msgs may start where dst ends, in dst's own array (dst[:n] and
// dst[n:m]): the messages are then stripped in place, which is how a
// caller builds a model request's messages in one allocation.
func AppendStripOrphans(dst, msgs []abi.Message) []abi.Message { return strip(dst, msgs, true) }

// StripOrphanCalls is StripOrphans for calls only: tool results whose call
// is not in msgs are kept. It suits a batch of new messages to store, whose
// first tool results may answer a call stored by an earlier run.
func StripOrphanCalls(msgs []abi.Message) []abi.Message {
	return strip(make([]abi.Message, 0, len(msgs)), msgs, false)
}

// strip appends msgs without their orphans to out. The i-th message is
// read before anything is written past out's first len(out)+i elements,
// so msgs may be out's own continuation.
func strip(out, msgs []abi.Message, results bool) []abi.Message {
	calls, answered := map[string]bool{}, map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.Contents {
			switch c.Type {
			case abi.ContentFunctionCall:
				calls[c.CallID] = true
			case abi.ContentFunctionResult:
				answered[c.CallID] = true
			}
		}
	}
	for _, m := range msgs {
		orphan := func(c abi.Content) bool {
			return (c.Type == abi.ContentFunctionCall && !answered[c.CallID]) ||
				(results && c.Type == abi.ContentFunctionResult && !calls[c.CallID])
		}
		n := 0
		for _, c := range m.Contents {
			if orphan(c) {
				n++
			}
		}
		if n == 0 {
			out = append(out, m)
			continue
		}
		kept := make([]abi.Content, 0, len(m.Contents)-n)
		hasText, hasPair := false, false
		for _, c := range m.Contents {
			if orphan(c) {
				continue
			}
			kept = append(kept, c)
			switch c.Type {
			case abi.ContentText:
				hasText = hasText || c.Text != ""
			case abi.ContentFunctionCall, abi.ContentFunctionResult:
				hasPair = true
			}
		}
		if !hasText && !hasPair {
			continue
		}
		m.Contents = kept
		out = append(out, m)
	}
	return out
}
