package wasmrt

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/instrument"
	"github.com/wasmhist/wasmhist/host/internal/loader"
)

// A module's first compilation runs in a process of its own, the host's own
// executable run again, under limits, so that a module the static bounds
// let through (loader.CheckCode) but that the optimizing compiler cannot
// handle costs the host nothing: the process compiles it into the
// compilation cache and exits, and the host then loads it from the cache.
// See RATIONALE.md, "Why are there bounds on a function's shape, and a
// compile process?".

// Limits of a compile process.
const (
	// CompileCPULimit is the most CPU time (user and system) it may take.
	// The largest sample plugin takes 2 s.
	CompileCPULimit = 10 * time.Second
	// CompileMemoryLimit is the most memory it may have resident. The
	// largest sample plugin takes 81 MiB.
	CompileMemoryLimit = 512 << 20
)

// compileProcessEnv, set to "1", makes the host's executable a compile
// process: the init function of this package compiles the module it reads
// from standard input and exits, before the program's main runs.
const compileProcessEnv = "WASMHIST_COMPILE_PROCESS"

// errRefusedApart: the compile process refused the module, within its
// limits. The host then compiles it itself, to return the refusal as its
// own error: that costs no more than the process spent.
var errRefusedApart = errors.New("refused by the compile process")

// ErrCompileProcess: the compile process could not be started or failed
// for a reason of its own, not the module's.
var ErrCompileProcess = errors.New("wasmrt: compile process failed")

func init() {
	if os.Getenv(compileProcessEnv) == "1" {
		os.Exit(compileProcess(os.Stdin, os.Stdout))
	}
}

// apartLimits are the limits of compile processes; tests lower them.
type apartLimits struct {
	cpu    time.Duration
	memory int64
}

var defaultApartLimits = apartLimits{cpu: CompileCPULimit * apartRaceCPU, memory: CompileMemoryLimit * apartRaceMemory}

// compileRequest is what the host sends a compile process, as a line of
// JSON before the module's bytes.
type compileRequest struct {
	Dir   string `json:"dir"`
	Pages uint32 `json:"pages"`
}

// compileResult is what a compile process answers, as JSON.
type compileResult struct {
	Error string `json:"error,omitempty"`
}

// compileApart checks wasm against the static bounds on its code, then
// compiles it in a compile process into the engine's cache.
func (e *Engine) compileApart(ctx context.Context, wasm []byte, pages uint32) error {
	if err := loader.CheckCode(wasm); err != nil {
		return err
	}
	limits := e.apart
	if limits == (apartLimits{}) {
		limits = defaultApartLimits
	}
	return runCompileProcess(ctx, e.cache.dir, wasm, pages, limits)
}

// runCompileProcess runs a compile process for wasm and waits for it,
// stopping it at the limits.
func runCompileProcess(ctx context.Context, dir string, wasm []byte, pages uint32, limits apartLimits) error {
	exe, err := executable()
	if err != nil {
		return fmt.Errorf("%w: cannot find the host's executable, which the host runs again to compile a plugin: %v", ErrCompileProcess, err)
	}
	req, _ := json.Marshal(compileRequest{Dir: dir, Pages: pages})
	cmd := exec.CommandContext(ctx, exe)
	cmd.Args = []string{exe} // nothing for the program's flags to parse
	cmd.Env = append(os.Environ(),
		compileProcessEnv+"=1",
		// The runtime collects harder as it nears the limit, before the
		// watchdog kills it at the limit.
		"GOMEMLIMIT="+strconv.FormatInt(limits.memory*3/4, 10),
	)
	cmd.Stdin = io.MultiReader(bytes.NewReader(append(req, '\n')), bytes.NewReader(wasm))
	var stdout bytes.Buffer
	stderr := &capped{max: 2048}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: start %s, which the host runs again to compile a plugin: %v", ErrCompileProcess, exe, err)
	}
	over := make(chan error, 1)
	done := make(chan struct{})
	go watch(cmd.Process, limits, over, done)
	err = cmd.Wait()
	close(done)
	select {
	case limit := <-over:
		return limit
	default:
	}
	if ctx.Err() != nil {
		return fmt.Errorf("compile process: %w", ctx.Err())
	}
	var res compileResult
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		return fmt.Errorf("%w: %v (%s): %q", ErrCompileProcess, err, exe, msg)
	}
	if res.Error != "" {
		return fmt.Errorf("%w: %s", errRefusedApart, res.Error)
	}
	return nil
}

// executable is the program to run as a compile process: the running
// executable itself, even if its file was replaced or removed since it
// started (Linux), else the path it was started from.
func executable() (string, error) {
	if runtime.GOOS == "linux" {
		if _, err := os.Stat("/proc/self/exe"); err == nil {
			return "/proc/self/exe", nil
		}
	}
	return os.Executable()
}

// watch kills p once it has taken more CPU time or memory than limits allow,
// sending the error that says so on over, until done is closed. Where
// /proc is missing it bounds the process's wall-clock time by limits.cpu:
// the compiler runs in one thread.
func watch(p *os.Process, limits apartLimits, over chan<- error, done <-chan struct{}) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	stat := "/proc/" + strconv.Itoa(p.Pid) + "/stat"
	_, _, proc := usage("/proc/self/stat")
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		cpu, rss, ok := usage(stat)
		switch {
		case !proc:
			cpu, rss = time.Since(start), 0
		case !ok: // it has exited
			return
		}
		var err error
		switch {
		case cpu > limits.cpu:
			err = fmt.Errorf("%w: compiling it took more than %v of CPU time, and was stopped: its functions are too large or intricate for the host's compiler; split them", hosterr.ErrCompileLimit, limits.cpu)
		case rss > limits.memory:
			err = fmt.Errorf("%w: compiling it took more than %d MiB of memory, and was stopped: its functions are too large or intricate for the host's compiler; split them", hosterr.ErrCompileLimit, limits.memory>>20)
		}
		if err != nil {
			over <- err
			p.Kill()
			return
		}
	}
}

// clockTicks is the unit of CPU times in /proc/PID/stat: USER_HZ, 100 on
// every Linux architecture.
const clockTicks = 100

// usage reads a process's CPU time and resident memory from its
// /proc/PID/stat.
func usage(stat string) (cpu time.Duration, rss int64, ok bool) {
	b, err := os.ReadFile(stat)
	if err != nil {
		return 0, 0, false
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing parenthesis, at field 3 (state).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return 0, 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	pages, err3 := strconv.ParseInt(f[21], 10, 64) // field 24
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, false
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, pages * int64(os.Getpagesize()), true
}

// capped keeps the first max bytes written to it.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// compileProcess is the main of a compile process: it reads a request and
// a module from in, compiles the module into the cache the request names
// as the host would, and writes the result to out. It returns the exit
// code.
func compileProcess(in io.Reader, out io.Writer) int {
	debug.SetTraceback("none")
	answer := func(err error) int {
		var res compileResult
		if err != nil {
			res.Error = err.Error()
		}
		b, _ := json.Marshal(res)
		if _, werr := out.Write(b); werr != nil {
			return 2
		}
		return 0
	}
	br := bufio.NewReader(in)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return answer(fmt.Errorf("%w: read request: %v", ErrCompileProcess, err))
	}
	var req compileRequest
	if err := json.Unmarshal(line, &req); err != nil {
		return answer(fmt.Errorf("%w: decode request: %v", ErrCompileProcess, err))
	}
	wasm, err := io.ReadAll(br)
	if err != nil {
		return answer(fmt.Errorf("%w: read module: %v", ErrCompileProcess, err))
	}
	ctx := context.Background()
	cache, err := NewCache(req.Dir)
	if err != nil {
		return answer(err)
	}
	defer cache.Close(ctx)
	sum := sha256.Sum256(wasm)
	c, err := compile(ctx, cache, nil, sum, bytesOf(wasm), req.Pages, nil)
	if err != nil {
		return answer(err)
	}
	c.Close(ctx)
	cache.markApart(sum)
	return answer(nil)
}

// apartPath is the file that marks the module whose sha256 is sum as
// compiled by a compile process, within its limits, for this version of
// the rewrite. It is not proof that the cache holds the code: a file of
// the cache may be removed at any time (wasmhist cache keeps the directory
// under a size). But a module that compiled within the limits costs the
// host no more if it compiles it again itself.
func (c *Cache) apartPath(sum [32]byte) string {
	return filepath.Join(c.dir, "compiled", fmt.Sprintf("%s-v%d", hex.EncodeToString(sum[:]), instrument.Version))
}

// compiledApart reports whether a compile process compiled the module.
func (c *Cache) compiledApart(sum [32]byte) bool {
	_, err := os.Stat(c.apartPath(sum))
	return err == nil
}

// markApart records that a compile process compiled the module. A
// failure only costs the next cold load another compile process.
func (c *Cache) markApart(sum [32]byte) { writeAtomic(c.apartPath(sum), nil) }

// refusedPath is the file that records why a compile process stopped at
// its limits compiling the module whose sha256 is sum, for this version of
// the rewrite: the next load refuses the module with that error rather
// than serving it on the interpreter while another compile process spends
// the same limits in vain.
func (c *Cache) refusedPath(sum [32]byte) string {
	return filepath.Join(c.dir, "refused", fmt.Sprintf("%s-v%d", hex.EncodeToString(sum[:]), instrument.Version))
}

// refusedApart returns the error a compile process refused the module
// with, wrapping hosterr.ErrCompileLimit; nil if none did.
func (c *Cache) refusedApart(sum [32]byte) error {
	b, err := os.ReadFile(c.refusedPath(sum))
	if err != nil {
		return nil
	}
	msg := strings.TrimSpace(strings.TrimPrefix(string(b), hosterr.ErrCompileLimit.Error()+":"))
	return fmt.Errorf("%w: %s (as when it was first loaded)", hosterr.ErrCompileLimit, msg)
}

// markRefused records err, a compile process's refusal at its limits.
func (c *Cache) markRefused(sum [32]byte, err error) {
	writeAtomic(c.refusedPath(sum), []byte(err.Error()))
}
