package host

import (
	"context"
	"encoding/json"
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

// Close frees the plugin's instances. Calls in progress finish first.
func (p *Plugin) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		p.host.untrack(p)
		p.closeErr = p.backend.close(ctx)
	})
	return p.closeErr
}

func (p *Plugin) has(export string) bool { return slices.Contains(p.exports, export) }
