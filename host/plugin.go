package host

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/host/internal/statepatch"
	"github.com/wasmhist/wasmhist/host/internal/validset"
)

// Plugin is a loaded plugin: its describe answer, its validated config and
// its pool of instances. It is safe for concurrent use; every call gets an
// instance of its own. A Plugin holds no session data.
type Plugin struct {
	host    *Host
	name    string // PluginInfo.Name once described, the source name before
	sum     string
	info    abi.PluginInfo
	exports []string
	config  json.RawMessage
	grants  []capability.Grant
	limits  Limits
	backend backend
	log     *slog.Logger

	stateSchema *schema.Schema
	initial     json.RawMessage
	omitState   map[string]bool
	valid       validset.Set // states the state_schema accepted; those a patch produced are the statepatch.Cache's Docs
	decoded     decodedMessages
	provided    decodedMessages // messages provide returned by value, schema-checked
	docs        *statepatch.Cache

	closeOnce sync.Once
	closeErr  error
}

// Info returns what the plugin's describe export reported.
func (p *Plugin) Info() abi.PluginInfo { return p.info }

// SHA256 is the hex sha256 of the plugin's WebAssembly bytes; empty for a
// native plugin.
func (p *Plugin) SHA256() string { return p.sum }

// Exports lists the ABI exports the plugin has, required ones first. A
// native plugin lists every export of the ABI; the optional ones it does not
// implement answer with ErrUnsupported.
func (p *Plugin) Exports() []string { return slices.Clone(p.exports) }

// InitialState is the state of a session slot the plugin has not seen yet.
func (p *Plugin) InitialState() json.RawMessage { return slices.Clone(p.initial) }

// Compiled waits until the plugin runs on compiled code and returns
// nil: at once for a plugin loaded from the compile cache, and for a
// native one. A plugin used for the first time runs on wazero's
// interpreter while it compiles in the background (RATIONALE: "Why does a
// plugin's first use run on the interpreter?"); Compiled then waits for
// that compilation, after which the code is in the compile cache and the
// next process loads the plugin warm. Use it to fill the cache ahead of
// use, as an installer or a service's start-up would. It returns the
// compilation's error, wrapping ErrCompileLimit when the compile process
// refused the module (the plugin then stays on the interpreter), or
// ctx's error if ctx ends first.
func (p *Plugin) Compiled(ctx context.Context) error {
	b, ok := p.backend.(*wasmBackend)
	if !ok {
		return nil
	}
	select {
	case <-b.module.Compiled(): // done, whatever ctx says
	default:
		select {
		case <-b.module.Compiled():
		case <-ctx.Done():
			return fmt.Errorf("host: waiting for plugin %s to compile: %w", p.name, ctx.Err())
		}
	}
	if err := b.module.CompileErr(); err != nil {
		return fmt.Errorf("host: plugin %s stays on the interpreter: %w", p.name, err)
	}
	return nil
}

// Close frees the plugin's idle instances and refuses new calls. A call
// in progress runs to its end, or its deadline, on its instance and code,
// which are freed when it returns.
func (p *Plugin) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		p.host.untrack(p)
		p.closeErr = p.backend.close(ctx)
	})
	return p.closeErr
}

func (p *Plugin) has(export string) bool { return slices.Contains(p.exports, export) }
