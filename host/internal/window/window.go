// Package window is the one implementation of a history window shared by
// the plugin runtime (abi.Window selections a plugin returns from provide)
// and the agent's reducers, so that a plugin's window and a configured
// reducer keep exactly the same messages. The rules are those of package
// host/agent/reducer's documentation.
package window

import "github.com/wasmhist/wasmhist/abi"

// Apply reduces msgs to w, estimating tokens with EstimateTokens. A zero
// Window keeps everything. The result may share elements with msgs but
// never aliases its backing array.
func Apply(msgs []abi.Message, w abi.Window) []abi.Message {
	return Keep(msgs, w.MaxMessages, w.MaxTokens, EstimateTokens)
}

// Newest is Apply of a history known only by its newest messages: head is
// the history's leading system message (nil when its first message is not
// one), tail the newest messages after it, and whole reports whether tail
// is every message after head. It returns what Apply returns for head
// followed by the whole rest of the history, and true, when tail decides
// that; false when it does not: the window may reach past tail, or a tool
// result in tail may answer a call before it (or none at all, which only
// the whole history can tell). The caller then calls it again with more of
// the history; with whole set it always decides.
//
// It walks tail from its newest message backwards, as Keep walks groups: a
// message at i starts a group exactly when every tool result from i on
// answers a call from i on (every call id seen walking back is then
// answered), and a group that passes a bound ends the window whatever its
// oldest message is, since a group only grows towards the past and every
// message costs at least one message and a positive estimate. So a window
// over a long history costs the messages it keeps, and the one past them,
// not the history (RATIONALE: "Why is a window over a plugin's state chosen
// from the newest message backwards?").
func Newest(head, tail []abi.Message, whole bool, w abi.Window) ([]abi.Message, bool) {
	if whole {
		msgs := make([]abi.Message, 0, len(head)+len(tail))
		return Apply(append(append(msgs, head...), tail...), w), true
	}
	maxMsgs, maxTokens := w.MaxMessages, w.MaxTokens
	if maxMsgs <= 0 && maxTokens <= 0 {
		return nil, false // everything is kept: only the whole history says what
	}
	usedMsgs, usedTokens := len(head), 0
	if maxTokens > 0 {
		for _, m := range head {
			usedTokens += EstimateTokens(m)
		}
	}
	// unanswered holds the call ids of the tool results from i on whose
	// call is not from i on; past, once the group after keepFrom passed a
	// bound, those of them whose call is still to be found.
	var unanswered, past map[string]struct{}
	keepFrom, groupTokens := len(tail), 0
	for i := len(tail) - 1; i >= 0; i-- {
		m := tail[i]
		// A message's results answer calls before it, never its own: its
		// calls answer what is newer first.
		for _, c := range m.Contents {
			if c.Type == abi.ContentFunctionCall {
				delete(unanswered, c.CallID)
				delete(past, c.CallID)
			}
		}
		if past != nil {
			if len(past) == 0 {
				// Every result of the group is answered from i on: the
				// group reaches back past where it passed the bound.
				return dropLeadingOrphans(head, tail[keepFrom:]), true
			}
			continue
		}
		for _, c := range m.Contents {
			if c.Type == abi.ContentFunctionResult {
				if unanswered == nil {
					unanswered = map[string]struct{}{}
				}
				unanswered[c.CallID] = struct{}{}
			}
		}
		if maxTokens > 0 {
			groupTokens += EstimateTokens(m)
		}
		n := keepFrom - i
		if (maxMsgs > 0 && usedMsgs+n > maxMsgs) || (maxTokens > 0 && usedTokens+groupTokens > maxTokens) {
			if len(unanswered) == 0 {
				// i starts the group, which passes a bound.
				return dropLeadingOrphans(head, tail[keepFrom:]), true
			}
			// The group starts before i if each of these results answers
			// a call before i, and later if one answers none at all:
			// which, only finding their calls tells.
			past = unanswered
			continue
		}
		if len(unanswered) == 0 {
			usedMsgs += n
			usedTokens += groupTokens
			keepFrom, groupTokens = i, 0
		}
	}
	return nil, false
}

// Per-message overhead of EstimateTokens: roughly what chat formats spend on
// role and separators.
const messageOverheadTokens = 4

// Media parts are counted as a flat cost: their real price depends on the
// model and the resolution, which the host does not know.
const mediaTokens = 85

// EstimateTokens is a cheap, tokenizer-free estimate of what a message costs
// in a model's context: 4 tokens of overhead, plus one token per 4 bytes
// (rounded up) of text, reasoning, function names, arguments, results and
// errors, plus 85 tokens per data or uri part. It over-counts English prose
// slightly, which errs on the side of fitting the context.
func EstimateTokens(m abi.Message) int {
	bytes := 0
	n := messageOverheadTokens
	for _, c := range m.Contents {
		switch c.Type {
		case abi.ContentData, abi.ContentURI:
			n += mediaTokens
		default:
			bytes += len(c.Text) + len(c.Name) + len(c.Arguments) + len(c.Result) + len(c.Error)
		}
	}
	return n + (bytes+3)/4
}

// Keep keeps the newest groups that fit both bounds (0: no bound).
func Keep(msgs []abi.Message, maxMsgs, maxTokens int, est func(abi.Message) int) []abi.Message {
	if len(msgs) == 0 {
		return nil
	}
	var head []abi.Message
	body := msgs
	if msgs[0].Role == abi.RoleSystem {
		head, body = msgs[:1], msgs[1:]
	}
	if maxMsgs <= 0 && maxTokens <= 0 {
		return dropLeadingOrphans(head, body)
	}

	usedMsgs, usedTokens := len(head), 0
	if maxTokens > 0 {
		for _, m := range head {
			usedTokens += est(m)
		}
	}
	starts := groupStarts(body)
	keepFrom := len(body)
	for g := len(starts) - 1; g >= 0; g-- {
		lo, hi := starts[g], keepFrom
		n := hi - lo
		if maxMsgs > 0 && usedMsgs+n > maxMsgs {
			break
		}
		t := 0
		if maxTokens > 0 {
			for _, m := range body[lo:hi] {
				t += est(m)
			}
			if usedTokens+t > maxTokens {
				break
			}
		}
		usedMsgs += n
		usedTokens += t
		keepFrom = lo
	}
	return dropLeadingOrphans(head, body[keepFrom:])
}

// groupStarts returns the index of the first message of every group of body,
// ascending. A group is one message, or an assistant tool-call message
// through the last tool message answering one of its calls (with whatever
// lies between, so that interleaved calls and results merge into one group).
func groupStarts(body []abi.Message) []int {
	callAt := map[string]int{}
	var starts []int
	for i, m := range body {
		first := i
		if m.Role == abi.RoleTool || len(m.ResultIDs()) > 0 {
			for _, id := range m.ResultIDs() {
				if j, ok := callAt[id]; ok && j < first {
					first = j
				}
			}
		}
		if first == i {
			starts = append(starts, i)
		} else {
			// Merge every group that started after the answered call into
			// the group holding the call; starts[0] == 0 always remains.
			for starts[len(starts)-1] > first {
				starts = starts[:len(starts)-1]
			}
		}
		for _, id := range m.CallIDs() {
			callAt[id] = i
		}
	}
	return starts
}

// dropLeadingOrphans returns head followed by kept, without the tool results
// at the start of kept: their calls are not in the window, and a service
// rejects a tool message with no call before it.
func dropLeadingOrphans(head, kept []abi.Message) []abi.Message {
	for len(kept) > 0 && isToolResult(kept[0]) {
		kept = kept[1:]
	}
	out := make([]abi.Message, 0, len(head)+len(kept))
	out = append(out, head...)
	return append(out, kept...)
}

func isToolResult(m abi.Message) bool {
	return m.Role == abi.RoleTool && len(m.CallIDs()) == 0
}
