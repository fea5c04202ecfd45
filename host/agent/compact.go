package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/reducer"
	"github.com/wasmhist/wasmhist/host/session"
)

// ErrCompaction reports a summary the model did not give (an empty
// answer); a model call that fails is reported with its own error.
var ErrCompaction = errors.New("agent: compaction failed")

// DefaultSummaryInstructions are the instructions of the model call that
// summarises the oldest part of a history (Compaction.Instructions).
const DefaultSummaryInstructions = "You summarise conversations. Keep every fact the user stated about themselves, " +
	"every decision and every open question, in the user's own words where you can. Answer with the summary only."

// SummaryPrompt is the user message that ends the summarising call, after
// the messages to summarise.
const SummaryPrompt = "Summarise the conversation above."

// SummaryPrefix starts the message that stands for the summarised
// messages in what a run sends.
const SummaryPrefix = "Summary of the earlier conversation:\n"

// SummaryProperty is the additional property (abi.Message) that marks the
// summary message a run sends, with the number of messages it stands for:
// {"covers": N}.
const SummaryProperty = "wasmhist_summary"

// Compaction summarises the oldest part of the loaded history when the
// history a run would send exceeds a token budget. The model the agent
// runs with writes the summary; the run sends it, as one user message
// (marked with SummaryProperty), in place of the messages it covers,
// followed by the newest messages verbatim. Nothing stored changes: the
// provider keeps every original message, and the session records the
// summary beside them (session.Session.Compactions), committed with the
// run, so the next run reuses it while the history still starts with what
// it covers, and deleting it (session.Session.DeleteCompaction) undoes it.
//
// The summary stands for whole turns (a user message and what follows it),
// so a call is never separated from its results, and a leading system
// message is never summarised. It applies wherever the agent loads history: per
// run, and before every call in per-service-call sentinel mode; a service
// that keeps the conversation is sent no history, so nothing is compacted.
type Compaction struct {
	// MaxTokens is the budget of the loaded history, as Estimate counts
	// it, the summary included. 0 turns compaction off.
	MaxTokens int
	// KeepTokens bounds the newest messages kept verbatim when a summary
	// is made (0: MaxTokens/2). The newest call with its results is kept
	// whatever its size.
	KeepTokens int
	// Estimate counts a message's tokens (nil: reducer.EstimateTokens).
	Estimate func(abi.Message) int
	// Instructions of the summarising call (empty: DefaultSummaryInstructions).
	Instructions string
}

func (c Compaction) estimate(msgs []abi.Message) int {
	est := c.Estimate
	if est == nil {
		est = reducer.EstimateTokens
	}
	n := 0
	for _, m := range msgs {
		n += est(m)
	}
	return n
}

// compact returns h, the loader's history, as the run sends it: with the
// session's summary in place of the messages it covers, and a new summary
// made (and recorded in the working session) when that is still over the
// budget.
func (r *run) compact(ctx context.Context, key string, h []abi.Message) ([]abi.Message, error) {
	c := r.a.cfg.Compaction
	if c.MaxTokens <= 0 || len(h) == 0 {
		return h, nil
	}
	head, body := []abi.Message(nil), h
	if h[0].Role == abi.RoleSystem {
		head, body = h[:1], h[1:]
	}
	rec, ok := r.work.Compactions[key]
	ok = ok && rec.Covers <= len(body) && digest(body[:rec.Covers]) == rec.SHA256
	view := h
	if ok {
		view = concat(head, []abi.Message{summaryMessage(rec)}, body[rec.Covers:])
	}
	if c.estimate(view) <= c.MaxTokens {
		return view, nil
	}
	keep := c.KeepTokens
	if keep <= 0 {
		keep = c.MaxTokens / 2
	}
	cut := keptFrom(body, keep, c)
	if cut == 0 || (ok && cut <= rec.Covers) {
		// Nothing more to summarise: the newest group alone is over the
		// budget, or the summary covers everything older already.
		return view, nil
	}
	older := body[:cut]
	if ok {
		// The earlier summary stands for what it covers, so each
		// compaction reads what is new since, not the whole history.
		older = concat([]abi.Message{summaryMessage(rec)}, body[rec.Covers:cut])
	}
	text, err := r.summarise(ctx, older)
	if err != nil {
		return nil, fmt.Errorf("agent: compact %q: %w", key, err)
	}
	rec = session.Compaction{Covers: cut, SHA256: digest(body[:cut]), Summary: text}
	r.work.SetCompaction(key, rec)
	return concat(head, []abi.Message{summaryMessage(rec)}, body[cut:]), nil
}

// keptFrom returns where the newest turns that fit keep tokens start,
// moving back one turn at a time (a user message and what follows it up
// to the next one, so a call stays with its results), and keeping at
// least the newest turn.
func keptFrom(body []abi.Message, keep int, c Compaction) int {
	cut, used := len(body), 0
	for cut > 0 {
		start := turnStart(body, cut)
		t := c.estimate(body[start:cut])
		if used+t > keep && cut < len(body) {
			break
		}
		used += t
		cut = start
	}
	return cut
}

// turnStart returns the index of the user message that starts the turn
// ending at end-1, or 0.
func turnStart(body []abi.Message, end int) int {
	for i := end - 1; i > 0; i-- {
		if body[i].Role == abi.RoleUser {
			return i
		}
	}
	return 0
}

// summarise asks the agent's model for a summary of msgs. The call is not
// the run's: it is made on the configured model outside the run's
// persistence (nothing of it is stored) and with no tools.
func (r *run) summarise(ctx context.Context, msgs []abi.Message) (string, error) {
	c := r.a.cfg.Compaction
	instr := c.Instructions
	if instr == "" {
		instr = DefaultSummaryInstructions
	}
	req := model.Request{
		Instructions: instr,
		Messages:     append(reducer.StripOrphans(msgs), abi.NewMessage(abi.RoleUser, SummaryPrompt)),
		Store:        r.store,
	}
	// Hide the run from a persisting middleware in the stack.
	resp, err := r.a.cfg.Model.Complete(context.WithValue(ctx, runKey{}, (*run)(nil)), req)
	if err != nil {
		return "", err
	}
	var text string
	for _, m := range resp.Messages {
		if m.Role == abi.RoleAssistant {
			if t := strings.TrimSpace(m.TextContent()); t != "" {
				text = t
			}
		}
	}
	if text == "" {
		return "", fmt.Errorf("%w: the model answered the summary request with no text", ErrCompaction)
	}
	return text, nil
}

// summaryMessage is what a run sends in place of the messages rec covers.
func summaryMessage(rec session.Compaction) abi.Message {
	m := abi.NewMessage(abi.RoleUser, SummaryPrefix+rec.Summary)
	prop, _ := json.Marshal(map[string]int{"covers": rec.Covers})
	m.AdditionalProperties = map[string]json.RawMessage{SummaryProperty: prop}
	return m
}

// digest is the hex sha256 of msgs as JSON without the host's source
// stamps, which say how a message reached the run, not what it says.
func digest(msgs []abi.Message) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, m := range msgs {
		m.Source = nil
		if err := enc.Encode(m); err != nil {
			return ""
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
