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
