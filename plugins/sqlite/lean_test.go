//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// TestPluginLinksNeitherFmtNorJSON fails when a path the linker keeps
// reaches encoding/json's codec or fmt: one reachable call links the
// package wholesale.
func TestPluginLinksNeitherFmtNorJSON(t *testing.T) { sdktest.CheckLean(t, ".") }
