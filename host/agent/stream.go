package agent

import (
	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
)

// aggregator folds the updates of one streamed model call into the
// messages of a model.Response. Each call is aggregated on its own, so the
// tool-call round and the answer after the tools never fold into one
// message (the folding that leaves orphan calls in stored history).
type aggregator struct {
	msgs   []abi.Message
	curID  string
	role   abi.Role
	open   bool // msgs' last message takes further content
	convID string
	usage  *abi.Usage
	finish string
}

// add folds one update in. Text and reasoning parts are deltas appended to
// the previous part of the same type; other parts arrive whole. A new
// MessageID, or a new role, starts a new message.
func (a *aggregator) add(u model.Update) {
	if u.ConversationID != "" {
		a.convID = u.ConversationID
	}
	if u.Usage != nil {
		if a.usage == nil {
			a.usage = &abi.Usage{}
		}
		addUsage(a.usage, u.Usage)
	}
	if u.FinishReason != "" {
		a.finish = u.FinishReason
	}
	if u.MessageID != "" && u.MessageID != a.curID {
		a.curID, a.open = u.MessageID, false
	}
	if u.Role != "" {
		if a.open && u.Role != a.role {
			a.open = false
		}
		a.role = u.Role
	}
	for _, c := range u.Contents {
		if !a.open {
			role := a.role
			if role == "" {
				role = abi.RoleAssistant
			}
			a.msgs = append(a.msgs, abi.Message{Role: role, MessageID: a.curID})
			a.open = true
		}
		m := &a.msgs[len(a.msgs)-1]
		if n := len(m.Contents); n > 0 && (c.Type == abi.ContentText || c.Type == abi.ContentReasoning) &&
			m.Contents[n-1].Type == c.Type && len(c.AdditionalProperties) == 0 {
			m.Contents[n-1].Text += c.Text
			continue
		}
		m.Contents = append(m.Contents, c)
	}
}

func (a *aggregator) response() *model.Response {
	return &model.Response{Messages: a.msgs, ConversationID: a.convID, Usage: a.usage, FinishReason: a.finish}
}
