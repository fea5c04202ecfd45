package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/wasmhist/wasmhist/abi"
)

// Modules whose versions a bug report needs besides the command's own.
const (
	wazeroModule = "github.com/tetratelabs/wazero"
)

func runVersion(_ context.Context, e *env, args []string) error {
	const cmd = "version"
	fs := flagSet(e, cmd, helpText{
		summary:  "Prints the versions of wasmhist, the plugin ABI it speaks, Go, wazero and the Extism go-sdk\nwhose kernel it provides.",
		examples: []string{"wasmhist version"},
	})
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(cmd, "unexpected argument %q: version takes none", pos[0])
	}
	mod, deps := "unknown", map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		mod = bi.Main.Version
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			deps[d.Path] = d.Version
		}
	}
	if mod == "" || mod == "(devel)" {
		mod = "(devel): built from a source tree, not a released module"
	}
	orUnknown := func(v string) string {
		if v == "" {
			return "unknown"
		}
		return v
	}
	fmt.Fprintf(e.stdout, "wasmhist:  %s\n", mod)
	fmt.Fprintf(e.stdout, "abi:       %s\n", abi.Version)
	fmt.Fprintf(e.stdout, "go:        %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(e.stdout, "wazero:    %s\n", orUnknown(deps[wazeroModule]))
	fmt.Fprintf(e.stdout, "go-sdk:    %s (the Extism kernel it provides)\n", abi.ExtismKernel)
	return nil
}
