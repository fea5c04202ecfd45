package main

import (
	"errors"
	"os"
	"strings"

	"github.com/wasmhist/wasmhist/host/internal/instrument"
)

// interruptPath says how the host stops a call of the module past its
// deadline (abi/SPEC.md section 9): with the checks its rewrite adds, the
// fast path, or, for a module the rewrite does not take, with the
// runtime's own preemption, followed by what the author changes to get the
// fast path. It runs the rewrite the host runs at load.
func interruptPath(path string) string {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return "unknown: " + err.Error()
	}
	_, err = instrument.Module(wasm)
	switch {
	case err == nil:
		return "checks added by the host (the fast path)"
	case !errors.Is(err, instrument.ErrUnsupported):
		return "unknown: " + err.Error()
	}
	why := strings.TrimPrefix(err.Error(), instrument.ErrUnsupported.Error()+": ")
	advice := "see abi/SPEC.md section 9 for what the rewrite takes"
	if why == "a start function" {
		advice = "export the start function as _initialize instead (AssemblyScript: asc --exportStart _initialize; SPEC 11.2)"
	}
	return "the runtime's preemption, slower on every call (the module has " + why + "): " + advice
}
