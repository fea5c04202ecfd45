package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wasmhist/wasmhist/host"
)

// pluginSettings are the flags every command that runs a plugin shares:
// the plugin's configuration and the limits its calls run under.
type pluginSettings struct {
	config    configFlag
	timeout   duration
	memory    byteSize
	maxInput  byteSize
	maxOutput byteSize
}

// pluginFlags registers the plugin settings on fs, with the host's
// defaults as the flags' defaults so that --help shows them.
func pluginFlags(fs *flags) *pluginSettings {
	d := host.DefaultLimits()
	ps := &pluginSettings{
		timeout:   duration(d.CallTimeout),
		memory:    byteSize(int64(d.MemoryPages) * pageSize),
		maxInput:  byteSize(d.MaxInputBytes),
		maxOutput: byteSize(d.MaxOutputBytes),
	}
	fs.Var(&ps.config, "config", "the plugin's configuration: a `JSON` object, or @FILE")
	fs.Var(&ps.timeout, "timeout", "the deadline of one plugin call, a `DURATION` such as 10s")
	fs.Var(&ps.memory, "memory", "the cap of each plugin memory, a `SIZE` such as 64MiB")
	fs.Var(&ps.maxInput, "max-input", "the largest request sent to the plugin, a `SIZE`")
	fs.Var(&ps.maxOutput, "max-output", "the largest response accepted from the plugin, a `SIZE`")
	return ps
}

// pageSize is a WebAssembly memory page; minMemoryPages the least a Go
// guest starts with (host.Limits documents the same bound).
const (
	pageSize       = 64 << 10
	minMemoryPages = 43
)

// limits returns the host limits the flags ask for.
func (ps *pluginSettings) limits(cmd string) (host.Limits, error) {
	if ps.timeout <= 0 {
		return host.Limits{}, usagef(cmd, "--timeout %s: pass a positive duration such as 10s", time.Duration(ps.timeout))
	}
	for _, f := range []struct {
		name string
		v    byteSize
	}{{"memory", ps.memory}, {"max-input", ps.maxInput}, {"max-output", ps.maxOutput}} {
		if f.v <= 0 {
			return host.Limits{}, usagef(cmd, "--%s %s: pass a positive size such as 16MiB", f.name, f.v)
		}
	}
	pages := (int64(ps.memory) + pageSize - 1) / pageSize
	switch {
	case pages < minMemoryPages:
		return host.Limits{}, usagef(cmd, "--memory %s: a Go plugin needs at least %s to start", ps.memory, byteSize(minMemoryPages*pageSize))
	case pages > 65536:
		return host.Limits{}, usagef(cmd, "--memory %s: a plugin memory holds at most 4GiB", ps.memory)
	}
	return host.Limits{
		CallTimeout:    time.Duration(ps.timeout),
		MemoryPages:    uint32(pages),
		MaxInputBytes:  int(ps.maxInput),
		MaxOutputBytes: int(ps.maxOutput),
	}, nil
}

// limitAdvice says which flag raises the limit a plugin call ran into, or
// "" when err is not about a limit.
func limitAdvice(err error, l host.Limits) string {
	switch {
	case errors.Is(err, host.ErrTimeout):
		return fmt.Sprintf("the plugin call ran past its %s deadline: raise it with --timeout (e.g. --timeout %s) if the plugin is slow but sound, or fix the plugin", l.CallTimeout, suggestTimeout(l.CallTimeout))
	case errors.Is(err, host.ErrMemoryLimit):
		return fmt.Sprintf("the plugin needed more than its %s of memory: raise it with --memory (e.g. --memory %s), or fix the plugin", byteSize(int64(l.MemoryPages)*pageSize), byteSize(2*int64(l.MemoryPages)*pageSize))
	case errors.Is(err, host.ErrInputTooLarge):
		return fmt.Sprintf("the request to the plugin is larger than the %s --max-input allows: raise --max-input, or keep less history in the session state (a plugin that stores in a database sends less)", byteSize(l.MaxInputBytes))
	case errors.Is(err, host.ErrOutputTooLarge):
		return fmt.Sprintf("the plugin answered with more than the %s --max-output allows: raise --max-output, or configure the plugin to return less", byteSize(l.MaxOutputBytes))
	}
	return ""
}

// byteSize is a size flag: a number of bytes, or a number with a unit
// (B, KiB, MiB, GiB; KB, MB, GB are read as the same binary units).
type byteSize int64

var sizeUnits = []struct {
	suffix string
	n      int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}

// suggestTimeout is the --timeout a timed-out call's advice suggests:
// ten times the deadline it ran past, and never less than the default,
// so that an absurd deadline (1ns) is not answered with another (2ns).
func suggestTimeout(d time.Duration) time.Duration {
	return max(10*d, host.DefaultLimits().CallTimeout)
}

// duration is a flag value holding a time.Duration whose parse error
// says what a duration looks like: a bare number (10, as JSON
// configuration files tempt one to write) has no unit.
type duration time.Duration

func (d *duration) String() string { return time.Duration(*d).String() }

func (d *duration) Set(s string) error {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a duration: write a number with a unit, such as \"10s\" or \"500ms\"", s)
	}
	*d = duration(v)
	return nil
}

func (b *byteSize) Set(s string) error {
	t := strings.TrimSpace(s)
	mul := int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mul = strings.TrimSpace(rest), u.n
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mul {
		return fmt.Errorf("%q is not a size: write bytes, or a number with KiB, MiB or GiB", s)
	}
	*b = byteSize(n * mul)
	return nil
}

func (b byteSize) String() string {
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if int64(b) >= u.n && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// configFlag is --config: inline JSON, or @FILE.
type configFlag struct {
	raw json.RawMessage
}

func (c *configFlag) String() string { return string(c.raw) }

func (c *configFlag) Set(v string) error {
	b := []byte(v)
	if name, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if b, err = os.ReadFile(name); err != nil {
			return fmt.Errorf("reading the configuration: %w", err)
		}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return fmt.Errorf("the configuration is not a JSON object: pass one such as '{\"max_messages\": 50}', or @FILE")
	}
	c.raw = json.RawMessage(b)
	return nil
}
