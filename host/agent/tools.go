package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
)

// Tool is a Go function the model may call. Its arguments are a JSON object
// valid against Parameters; the agent checks them before calling Func and
// reports invalid ones to the model as the call's error, so the model can
// retry, rather than failing the run.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object. Nil accepts
	// any object.
	Parameters json.RawMessage
	// Func runs the tool. Its result is encoded as JSON for the model; an
	// error is reported to the model as the call's error. Func may call
	// TerminateLoop to end the run after this iteration's tools.
	Func func(ctx context.Context, args json.RawMessage) (any, error)
}

type compiledTool struct {
	Tool
	schema *jsonschema.Schema
}

func compileTools(tools []Tool) (map[string]*compiledTool, []model.ToolSpec, error) {
	out := make(map[string]*compiledTool, len(tools))
	specs := make([]model.ToolSpec, 0, len(tools))
	for _, t := range tools {
		if t.Name == "" || t.Func == nil {
			return nil, nil, fmt.Errorf("%w: tool %q needs a name and a Func", ErrConfig, t.Name)
		}
		if out[t.Name] != nil {
			return nil, nil, fmt.Errorf("%w: two tools named %q", ErrConfig, t.Name)
		}
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
		}
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft2020
		url := "tool:///" + t.Name + ".json"
		if err := c.AddResource(url, bytes.NewReader(params)); err != nil {
			return nil, nil, fmt.Errorf("%w: tool %q parameters: %v", ErrConfig, t.Name, err)
		}
		schema, err := c.Compile(url)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: tool %q parameters: %v", ErrConfig, t.Name, err)
		}
		t.Parameters = params
		out[t.Name] = &compiledTool{Tool: t, schema: schema}
		specs = append(specs, model.ToolSpec{Name: t.Name, Description: t.Description, Parameters: params})
	}
	return out, specs, nil
}

type terminateKey struct{}

// TerminateLoop, called from a Tool's Func, ends the run once the tools of
// the current iteration have finished. Their results are the run's last
// messages: no model sees them in this run. It does nothing outside a tool.
func TerminateLoop(ctx context.Context) {
	if f, ok := ctx.Value(terminateKey{}).(*atomic.Bool); ok {
		f.Store(true)
	}
}

// runTools runs the function calls of one model response in parallel and
// returns one tool message per call, in call order, and whether a tool
// asked to end the loop.
func (a *Agent) runTools(ctx context.Context, calls []abi.Content) ([]abi.Message, bool) {
	var terminate atomic.Bool
	tctx := context.WithValue(ctx, terminateKey{}, &terminate)
	results := make([]abi.Content, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = a.runTool(tctx, call)
		}()
	}
	wg.Wait()
	msgs := make([]abi.Message, len(results))
	for i, r := range results {
		msgs[i] = abi.Message{Role: abi.RoleTool, Contents: []abi.Content{r}}
	}
	return msgs, terminate.Load()
}

func (a *Agent) runTool(ctx context.Context, call abi.Content) (res abi.Content) {
	res = abi.Content{Type: abi.ContentFunctionResult, CallID: call.CallID}
	defer func() {
		// A panicking tool is a failed call the model can see, not a
		// crashed host.
		if p := recover(); p != nil {
			res.Result, res.Error = nil, fmt.Sprintf("tool %q panicked: %v", call.Name, p)
		}
	}()
	t := a.tools[call.Name]
	if t == nil {
		res.Error = fmt.Sprintf("unknown tool %q", call.Name)
		return res
	}
	args := call.Arguments
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		res.Error = fmt.Sprintf("arguments are not JSON: %v", err)
		return res
	}
	if err := t.schema.Validate(v); err != nil {
		res.Error = fmt.Sprintf("invalid arguments: %v", err)
		return res
	}
	out, err := t.Func(ctx, args)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	b, err := json.Marshal(out)
	if err != nil {
		res.Error = fmt.Sprintf("encoding the result: %v", err)
		return res
	}
	res.Result = b
	return res
}
