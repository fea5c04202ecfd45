package offline

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
)

// turn is what the model says in one call: text, tool calls, or both.
type turn struct {
	text  string
	calls []call
}

type call struct {
	name string
	args string
}

// Help is the fallback reply: what the offline model can do.
const Help = `I'm the offline model, so my skills are small: I can tell the time, ` +
	`do arithmetic, and remember what you tell me about yourself ` +
	`(try "I like Italian food", then later "what food do I like?").`

// The model's expressions, each compiled on its first use (see pattern).
var (
	reTime = lazy(`(?i)\b(what(?:'s| is) the time|what time is it|time is it|current time|the time now|`+
		`what(?:'s| is) the date|what date is it|what day is (?:it|today)|today'?s date)\b`,
		containsFold("time", "date", "day"))
	// reExpr finds an arithmetic expression: numbers joined by at least
	// one operator, with parentheses.
	reExpr      = lazy(`[-(]*\s*\d[\d.]*(?:\s*\)*\s*(?:[-+*/%^×÷x]|\*\*)\s*[-(]*\s*\d[\d.]*)+\s*\)*`, hasDigit)
	reLikesQ    = lazy(`(?i)^(?:what|which) (?:(?:kind of |sort of |type of )?([\p{L} ]+?) )?do i (?:like|love|enjoy|adore|prefer)$`, startsFold("w"))
	reNameQ     = lazy(`(?i)^(?:what(?:'s| is) my name|who am i|do you (?:know|remember) my name)$`, startsFold("wd"))
	reFavQ      = lazy(`(?i)^what(?:'s| is) my favou?rite ([\p{L} ]+)$`, startsFold("w"))
	reMemoQ     = lazy(`(?i)^what (?:did i ask you to|should you|must you|do you need to) remember$`, startsFold("w"))
	reSummaryQ  = lazy(`(?i)^(?:what did i (?:tell|say to) you|what have i told you|what do you (?:know|remember)(?: about me)?|what do you remember)$`, startsFold("w"))
	reSummarise = lazy(`(?i)^summari[sz]e (?:the|this) conversation(?: above| so far)?$`, startsFold("s"))
	reGreeting  = lazy(`(?i)^(?:hi|hello|hey|good (?:morning|afternoon|evening))\b`, startsFold("hg"))
	reThanks    = lazy(`(?i)^(?:thanks|thank you|cheers)\b`, startsFold("tc"))
)

func hasDigit(s string) bool { return strings.ContainsAny(s, "0123456789") }

// answer decides the model's turn from the request alone.
func answer(req model.Request) turn {
	if results, calls := pendingResults(req.Messages); len(results) > 0 {
		return turn{text: fromResults(results, calls)}
	}
	text := lastUserText(req.Messages)
	question := strings.Trim(strings.TrimSpace(text), " ?!.")
	known := facts(req.Messages)

	if reSummarise.MatchString(question) {
		return turn{text: summary(req.Messages)}
	}
	if t, ok := recall(question, known); ok {
		return t
	}
	// Statements are acknowledged; the other clauses may need a tool. A
	// statement is never read as arithmetic ("remember the 2024-05-01
	// meeting" is not a subtraction).
	var acks, rest []string
	for _, c := range clauses(text) {
		if f, ok := parseFact(c); ok {
			acks = append(acks, acknowledge(f))
		} else {
			rest = append(rest, c)
		}
	}
	if t, ok := useTools(strings.Join(rest, ". "), req.Tools); ok {
		t.text = strings.TrimSpace(strings.Join(append(acks, t.text), " "))
		return t
	}
	if len(acks) > 0 {
		return turn{text: strings.Join(acks, " ")}
	}
	switch {
	case reGreeting.MatchString(question):
		if name := lastName(known); name != "" {
			return turn{text: "Hello, " + name + "! How can I help?"}
		}
		return turn{text: "Hello! " + Help}
	case reThanks.MatchString(question):
		return turn{text: "You're welcome."}
	}
	return turn{text: Help}
}

// pendingResults returns the function results at the end of the
// conversation (the tools the model asked for have answered) and the calls
// they answer, by call id.
func pendingResults(msgs []abi.Message) ([]abi.Content, map[string]abi.Content) {
	var results []abi.Content
	i := len(msgs) - 1
	for ; i >= 0; i-- {
		rs := contentsOf(msgs[i], abi.ContentFunctionResult)
		if len(rs) == 0 || msgs[i].TextContent() != "" {
			break
		}
		results = append(rs, results...)
	}
	calls := map[string]abi.Content{}
	for ; i >= 0; i-- {
		cs := contentsOf(msgs[i], abi.ContentFunctionCall)
		for _, c := range cs {
			calls[c.CallID] = c
		}
		if len(cs) > 0 {
			break
		}
	}
	return results, calls
}

func contentsOf(m abi.Message, t abi.ContentType) []abi.Content {
	var out []abi.Content
	for _, c := range m.Contents {
		if c.Type == t {
			out = append(out, c)
		}
	}
	return out
}

func lastUserText(msgs []abi.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == abi.RoleUser {
			return msgs[i].TextContent()
		}
	}
	return ""
}

// fromResults answers with what the tools returned.
func fromResults(results []abi.Content, calls map[string]abi.Content) string {
	var out []string
	for _, r := range results {
		name := calls[r.CallID].Name
		if name == "" {
			name = "requested"
		}
		if r.Error != "" {
			out = append(out, fmt.Sprintf("The %s tool failed: %s.", name, strings.TrimRight(r.Error, ".")))
			continue
		}
		switch name {
		case ClockTool:
			var c ClockResult
			if json.Unmarshal(r.Result, &c) == nil && c.Time != "" {
				out = append(out, clockSentence(c))
				continue
			}
		case CalculatorTool:
			var c CalculatorResult
			if json.Unmarshal(r.Result, &c) == nil && c.Result != "" {
				out = append(out, fmt.Sprintf("%s = %s.", strings.TrimSpace(c.Expression), c.Result))
				continue
			}
		}
		out = append(out, fmt.Sprintf("The %s tool returned %s.", name, r.Result))
	}
	return strings.Join(out, " ")
}

func clockSentence(c ClockResult) string {
	date := c.Date
	if d, err := time.Parse("2006-01-02", c.Date); err == nil {
		date = d.Format("Monday, 2 January 2006")
	}
	return fmt.Sprintf("It is %s (%s) on %s.", c.Time, c.Timezone, date)
}

// recall answers a question about what the user said earlier.
func recall(q string, known []fact) (turn, bool) {
	switch m := reLikesQ.FindStringSubmatch(q); {
	case m != nil:
		return turn{text: likes(strings.TrimSpace(m[1]), known)}, true
	case reNameQ.MatchString(q):
		if name := lastName(known); name != "" {
			return turn{text: "Your name is " + name + "."}, true
		}
		return turn{text: "You haven't told me your name."}, true
	case reMemoQ.MatchString(q):
		var memos []string
		for _, f := range known {
			if f.kind == factMemo {
				memos = append(memos, f.object)
			}
		}
		if len(memos) == 0 {
			return turn{text: "You haven't asked me to remember anything."}, true
		}
		return turn{text: "You asked me to remember " + joinAnd(memos) + "."}, true
	case reSummaryQ.MatchString(q):
		if len(known) == 0 {
			return turn{text: "You haven't told me anything about yourself yet."}, true
		}
		var parts []string
		for _, f := range known {
			parts = append(parts, f.describe())
		}
		return turn{text: "You told me that " + joinAnd(parts) + "."}, true
	}
	if m := reFavQ.FindStringSubmatch(q); m != nil {
		thing := strings.ToLower(strings.TrimSpace(m[1]))
		for i := len(known) - 1; i >= 0; i-- {
			if f := known[i]; f.kind == factFavourite && f.thing == thing {
				return turn{text: "You told me " + f.describe() + "."}, true
			}
		}
		return turn{text: "You haven't told me your favourite " + thing + "."}, true
	}
	return turn{}, false
}

// likes answers "what (topic) do I like?" from the user's statements. A
// topic keeps only the likes that mention it ("food" finds "Italian food").
func likes(topic string, known []fact) string {
	topic = strings.ToLower(topic)
	if topic == "things" || topic == "stuff" {
		topic = ""
	}
	var parts []string
	for _, f := range known {
		if f.kind == factLike && mentions(f.object, topic) {
			parts = append(parts, "you "+f.verb+" "+f.object)
		}
	}
	switch {
	case len(parts) > 0:
		return "You told me " + joinAnd(parts) + "."
	case topic != "":
		return "You haven't told me what " + topic + " you like."
	}
	return "You haven't told me what you like."
}

func mentions(object, topic string) bool {
	if topic == "" {
		return true
	}
	o := strings.ToLower(object)
	return strings.Contains(o, topic) || strings.Contains(o, strings.TrimSuffix(topic, "s"))
}

func lastName(known []fact) string {
	for i := len(known) - 1; i >= 0; i-- {
		if known[i].kind == factName {
			return known[i].object
		}
	}
	return ""
}

func acknowledge(f fact) string {
	switch f.kind {
	case factLike:
		return "Noted: " + f.describe() + ". I'll remember that."
	case factName:
		return "Nice to meet you, " + f.object + "."
	case factFavourite:
		return "Noted: " + f.describe() + "."
	default:
		return "I'll remember " + f.object + "."
	}
}

// useTools asks for the clock and/or the calculator when the message needs
// them. A tool that is not offered is not called: arithmetic is then done
// directly, and the time cannot be known.
func useTools(text string, tools []model.ToolSpec) (turn, bool) {
	offered := map[string]bool{}
	for _, t := range tools {
		offered[t.Name] = true
	}
	var t turn
	var direct []string
	if reTime.MatchString(text) {
		if offered[ClockTool] {
			t.calls = append(t.calls, call{name: ClockTool, args: `{}`})
		} else {
			direct = append(direct, "I can't tell the time: no clock tool is available.")
		}
	}
	if expr := strings.TrimSpace(reExpr.FindString(text)); expr != "" {
		if offered[CalculatorTool] {
			args, _ := json.Marshal(map[string]string{"expression": expr})
			t.calls = append(t.calls, call{name: CalculatorTool, args: string(args)})
		} else if v, err := Evaluate(expr); err == nil {
			direct = append(direct, fmt.Sprintf("%s = %s.", expr, FormatNumber(v)))
		} else {
			direct = append(direct, fmt.Sprintf("I can't compute %s: %v.", expr, err))
		}
	}
	if len(t.calls) == 0 && len(direct) == 0 {
		return turn{}, false
	}
	if len(t.calls) == 0 {
		t.text = strings.Join(direct, " ")
	}
	return t, true
}

// summary restates each statement the user made in msgs, in their own
// words and oldest first: a summary sent back as a user message (package
// agent's compaction) is then remembered as the statements were.
func summary(msgs []abi.Message) string {
	var said []string
	seen := map[string]bool{}
	for _, m := range msgs {
		if m.Role != abi.RoleUser {
			continue
		}
		for _, c := range clauses(m.TextContent()) {
			if _, ok := parseFact(c); ok && !seen[c] {
				seen[c] = true
				said = append(said, strings.TrimRight(c, " .!?"))
			}
		}
	}
	if len(said) == 0 {
		return "The user stated nothing about themselves."
	}
	return "The user said:\n" + strings.Join(said, ".\n") + "."
}
