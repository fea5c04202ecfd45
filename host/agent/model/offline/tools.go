package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/wasmhist/wasmhist/host/agent/model"
)

// Tool names the offline model calls.
const (
	ClockTool      = "clock"
	CalculatorTool = "calculator"
)

// Tool is a Go function the model may call, with the JSON Schema of its
// arguments. Its fields match agent.Tool, so a Tool converts directly:
// agent.Tool(t).
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
	Func        func(ctx context.Context, args json.RawMessage) (any, error)
	// SafeToRepeat: running the tool twice for one call does no harm
	// (agent.Tool has the same field; both tools here only read).
	SafeToRepeat bool
	// NeedsApproval: a person approves each call first (agent.Tool has
	// the same field; neither tool here needs it).
	NeedsApproval bool
}

// Spec returns the tool as the model sees it.
func (t Tool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
}

// Tools returns the clock and the calculator. now is the clock's time
// source; nil means time.Now.
func Tools(now func() time.Time) []Tool {
	return []Tool{Clock(now), Calculator()}
}

// ClockResult is what the clock tool returns.
type ClockResult struct {
	Time     string `json:"time"`    // 15:04
	Date     string `json:"date"`    // 2006-01-02
	Weekday  string `json:"weekday"` // Monday
	Timezone string `json:"timezone"`
	RFC3339  string `json:"rfc3339"`
}

// Clock returns a tool that reports the current time. now is its time
// source (nil means time.Now), so tests and demos can fix it.
func Clock(now func() time.Time) Tool {
	if now == nil {
		now = time.Now
	}
	return Tool{
		SafeToRepeat: true,
		Name:         ClockTool,
		Description:  "Returns the current date and time.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string",` +
			`"description":"IANA time zone such as Europe/Paris; UTC when omitted"}},"additionalProperties":false}`),
		Func: func(ctx context.Context, args json.RawMessage) (any, error) {
			var a struct {
				Timezone string `json:"timezone"`
			}
			if len(args) > 0 {
				if err := json.Unmarshal(args, &a); err != nil {
					return nil, fmt.Errorf("clock: arguments: %w", err)
				}
			}
			loc := time.UTC
			if a.Timezone != "" {
				l, err := time.LoadLocation(a.Timezone)
				if err != nil {
					return nil, fmt.Errorf("clock: %w", err)
				}
				loc = l
			}
			t := now().In(loc)
			return ClockResult{
				Time: t.Format("15:04"), Date: t.Format("2006-01-02"), Weekday: t.Weekday().String(),
				Timezone: loc.String(), RFC3339: t.Format(time.RFC3339),
			}, nil
		},
	}
}

// CalculatorResult is what the calculator tool returns.
type CalculatorResult struct {
	Expression string `json:"expression"`
	// Result is the value, formatted by FormatNumber.
	Result string `json:"result"`
}

// Calculator returns a tool that evaluates an arithmetic expression (see
// Evaluate).
func Calculator() Tool {
	return Tool{
		SafeToRepeat: true,
		Name:         CalculatorTool,
		Description:  "Evaluates an arithmetic expression with + - * / % ^ and parentheses.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string",` +
			`"description":"for example (2 + 3) * 4"}},"required":["expression"],"additionalProperties":false}`),
		Func: func(ctx context.Context, args json.RawMessage) (any, error) {
			var a struct {
				Expression string `json:"expression"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, fmt.Errorf("calculator: arguments: %w", err)
			}
			v, err := Evaluate(a.Expression)
			if err != nil {
				return nil, fmt.Errorf("calculator: %w", err)
			}
			return CalculatorResult{Expression: a.Expression, Result: FormatNumber(v)}, nil
		},
	}
}
