package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// An operator's configuration file holds flag values, by flag name, for
// every command: {"plugin": "sqlite", "db": "/var/lib/wasmhist/h.db",
// "timeout": "10s", "memory": "64MiB", "config": {"max_messages": 50}}.
// Each command takes the keys it has flags for; a key no command has is
// an error (a misspelt key would otherwise be ignored), and the command
// line wins over the file.
const (
	configFileFlag = "config-file"
	configFileEnv  = "WASMHIST_CONFIG_FILE"
)

// configKeys are the flags of all commands, which a configuration file
// may set. TestConfigKeysAreTheFlags keeps the list equal to the flags.
var configKeys = []string{
	"accept-new-build", "as", "ask-before", "at", "base-url", "compact-at", "config", "db", "dir", "force", "format", "from", "json", "m", "max-input", "max-output", "memory",
	"model", "model-name", "module", "older-state", "older-than", "page-size", "per-service-call", "plugin", "raw", "run", "session",
	"sql", "state-key", "status", "store", "timeout", "to", "wasmhist",
}

// configFileArg finds --config-file in args (it must be read before the
// other flags are parsed, so that they can override it).
func configFileArg(args []string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != configFileFlag {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// applyConfigFile sets fs's flags from the configuration file named on
// the command line or in the environment, if any.
func applyConfigFile(fs *flags, cmd string, args []string) error {
	path := configFileArg(args)
	if path == "" && fs.e != nil && fs.e.getenv != nil {
		path = fs.e.getenv(configFileEnv)
	}
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return failf(cmd, "configuration file %s: %w: check the path (--%s or $%s)", path, err, configFileFlag, configFileEnv)
	}
	var values map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&values); err != nil || values == nil {
		return usagef(cmd, "configuration file %s is not a JSON object of flag names and values: %v", path, err)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k == configFileFlag || !slices.Contains(configKeys, k) {
			return usagef(cmd, "configuration file %s: %q is not a flag of any wasmhist command: use the flag names 'wasmhist help COMMAND' lists", path, k)
		}
		if fs.Lookup(k) == nil {
			continue // another command's
		}
		v, err := flagValue(values[k])
		if err != nil {
			return usagef(cmd, "configuration file %s: %q: %v", path, k, err)
		}
		if err := fs.Set(k, v); err != nil {
			return usagef(cmd, "configuration file %s: %q: %v", path, k, err)
		}
		if fs.fromFile == nil {
			fs.fromFile = map[string]fileValue{}
		}
		fs.fromFile[k] = fileValue{path: path, value: fs.Lookup(k).Value.String()}
	}
	return nil
}

// flagValue renders a JSON value as a flag's text: strings as they are,
// numbers and booleans as written, objects (a plugin's "config") as JSON.
func flagValue(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", fmt.Errorf("null is not a value: leave the key out")
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	case raw[0] == '{':
		return string(raw), nil
	case string(raw) == "true" || string(raw) == "false":
		return string(raw), nil
	}
	if _, err := strconv.ParseFloat(string(raw), 64); err == nil {
		return string(raw), nil
	}
	return "", fmt.Errorf("want a string, number, boolean or (for config) an object, got %s", raw)
}
