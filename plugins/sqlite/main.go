// Command sqlite is the wasmhist plugin that keeps chat history in an SQLite
// database the host owns and grants it through the sql capability. Build it
// with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o sqlite.wasm ./plugins/sqlite
//
// and load it with a grant of package host/sqlgrant naming the database
// file. Its logic lives in package provider.
package main

import (
	"github.com/wasmhist/wasmhist/plugins/sqlite/provider"
	"github.com/wasmhist/wasmhist/sdk"
)

func init() { sdk.Register(provider.Provider{}) }

// main never runs in a -buildmode=c-shared module; the host calls the
// exports package sdk defines.
func main() {}
