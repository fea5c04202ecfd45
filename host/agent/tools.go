package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/internal/schema"
)

// DefaultMaxParallelTools bounds the tools of one model response that run
// at once when Config.MaxParallelTools is zero. Models seldom ask for more
// than a handful of calls at once, so four keeps the common case fully
// parallel; tools mostly wait (on a plugin, a database, the network), so
// the bound does not follow GOMAXPROCS.
const DefaultMaxParallelTools = 4

// Tool is a Go function the model may call. Its arguments are a JSON object
// valid against Parameters (compiled like plugin schemas: references only to
// the schema itself and the project schemas, formats asserted); the agent
// checks them before calling Func and
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
	// SafeToRepeat marks a tool that may run twice for one call (it reads,
	// or what it does is idempotent). When a run stopped before a call's
	// result was recorded, the next run runs such a tool again; any other
	// tool's call is answered with an error saying its result is unknown.
	SafeToRepeat bool
	// NeedsApproval marks a tool a person must approve before each call.
	// A model response that calls it ends the run: the calls of that
	// response that need no approval run, and the others are recorded in
	// the session as open calls awaiting approval
	// (RunResult.ApprovalRequests, PendingApprovals). The next run carries
	// the decisions (RunOptions.Decisions) and continues: an approved call
	// runs then, a denied one is answered with the reason as its error.
	NeedsApproval bool
}

type compiledTool struct {
	Tool
	schema *schema.Schema
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
		// Tool schemas come from embedders' code but are as able as a
		// plugin's to name file:// or http:// references; compiling must
		// not read either.
		sc, err := schema.Compile(params, "tool "+t.Name+" parameters")
		if err != nil {
			return nil, nil, fmt.Errorf("%w: tool %q parameters: %w", ErrConfig, t.Name, err)
		}
		t.Parameters = params
		out[t.Name] = &compiledTool{Tool: t, schema: sc}
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

// runTools runs the function calls of one model response, at most
// a.maxParallel at once, started in call order, and returns one tool
// message per call, in call order, and whether a tool asked to end the
// loop. Calls not yet started when ctx ends are answered with its error
// instead of running.
func (a *Agent) runTools(ctx context.Context, calls []abi.Content) ([]abi.Message, bool) {
	var terminate atomic.Bool
	tctx := context.WithValue(ctx, terminateKey{}, &terminate)
	results := make([]abi.Content, len(calls))
	slots := make(chan struct{}, a.maxParallel)
	var wg sync.WaitGroup
	for i, call := range calls {
		if !acquire(ctx, slots) {
			results[i] = abi.Content{Type: abi.ContentFunctionResult, CallID: call.CallID, Error: ctx.Err().Error()}
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
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

// acquire takes a slot, or reports false once ctx has ended. A slot that
// frees as ctx ends is given back: select may pick either case, and a call
// must not start after the cancellation.
func acquire(ctx context.Context, slots chan struct{}) bool {
	select {
	case slots <- struct{}{}:
		if ctx.Err() != nil {
			<-slots
			return false
		}
		return true
	case <-ctx.Done():
		return false
	}
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
	if err := json.Unmarshal(args, new(any)); err != nil {
		res.Error = fmt.Sprintf("arguments are not JSON: %v", err)
		return res
	}
	if err := t.schema.Validate(args); err != nil {
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
