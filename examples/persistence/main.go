// Command persistence runs the same tool-using turn twice, once with the
// default per-run persistence and once with per-service-call persistence,
// and prints what the history provider holds after every commit, then what
// each mode keeps when the second model call fails.
//
// The model is a small deterministic one defined here, so the program needs
// no network and no key.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"strings"

	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	for _, perCall := range []bool{false, true} {
		for _, failSecond := range []bool{false, true} {
			if err := demo(ctx, perCall, failSecond); err != nil {
				return err
			}
		}
	}
	return nil
}

func demo(ctx context.Context, perCall, failSecond bool) error {
	mode := "per-run"
	if perCall {
		mode = "per-service-call"
	}
	title := mode
	if failSecond {
		title += ", second model call fails"
	}
	fmt.Printf("== %s\n", title)

	history := agent.NewMemoryProvider("history")
	m := &weatherModel{failSecond: failSecond}
	agent, err := agent.New(agent.Config{
		Model:                            m,
		Tools:                            []agent.Tool{weatherTool()},
		Providers:                        []agent.ProviderConfig{{Provider: history}},
		RequirePerServiceCallPersistence: perCall,
		Saver: saverFunc(func(_ context.Context, s *session.Session) error {
			msgs, err := history.Messages(s)
			if err != nil {
				return err
			}
			fmt.Printf("  commit rev %d: %s\n", s.Revision, summary(msgs))
			return nil
		}),
	})
	if err != nil {
		return err
	}
	s := session.New()
	res, err := agent.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "Weather in Oslo?")}, nil)
	if err != nil {
		fmt.Printf("  run failed: %v\n", err)
	} else {
		fmt.Printf("  answer: %s\n", res.Text())
	}
	msgs, err := history.Messages(s)
	if err != nil {
		return err
	}
	fmt.Printf("  stored: %s\n", summary(msgs))
	return nil
}

// summary names messages compactly: user, call, result, answer.
func summary(msgs []abi.Message) string {
	if len(msgs) == 0 {
		return "(nothing)"
	}
	var out []string
	for _, m := range msgs {
		switch {
		case len(m.CallIDs()) > 0:
			out = append(out, "call")
		case len(m.ResultIDs()) > 0:
			out = append(out, "result")
		case m.Role == abi.RoleUser:
			out = append(out, "user")
		default:
			out = append(out, "answer")
		}
	}
	return strings.Join(out, " ")
}

func weatherTool() agent.Tool {
	return agent.Tool{
		Name:        "weather",
		Description: "current weather of a city",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		Func: func(_ context.Context, args json.RawMessage) (any, error) {
			var a struct{ City string }
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, err
			}
			return map[string]string{"city": a.City, "sky": "clear"}, nil
		},
	}
}

// weatherModel asks for the weather tool when the last message is the
// user's and answers from the tool result otherwise.
type weatherModel struct {
	calls      int
	failSecond bool
}

var errUnavailable = errors.New("model unavailable")

func (w *weatherModel) Complete(_ context.Context, req model.Request) (*model.Response, error) {
	w.calls++
	if w.failSecond && w.calls == 2 {
		return nil, errUnavailable
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == abi.RoleTool {
		var r struct{ City, Sky string }
		_ = json.Unmarshal(last.Contents[0].Result, &r)
		return &model.Response{Messages: []abi.Message{abi.NewMessage(abi.RoleAssistant, fmt.Sprintf("%s: %s skies.", r.City, r.Sky))}}, nil
	}
	call := abi.Content{Type: abi.ContentFunctionCall, CallID: "call-1", Name: "weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}
	return &model.Response{Messages: []abi.Message{{Role: abi.RoleAssistant, Contents: []abi.Content{call}}}}, nil
}

func (w *weatherModel) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Update, error] {
	return func(yield func(model.Update, error) bool) {
		r, err := w.Complete(ctx, req)
		if err != nil {
			yield(model.Update{}, err)
			return
		}
		for _, m := range r.Messages {
			if !yield(model.Update{Role: m.Role, Contents: m.Contents}, nil) {
				return
			}
		}
	}
}

type saverFunc func(context.Context, *session.Session) error

func (f saverFunc) Save(ctx context.Context, s *session.Session) error { return f(ctx, s) }
