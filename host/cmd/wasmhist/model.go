package main

import (
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/host/agent"

	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
	"github.com/wasmhist/wasmhist/host/agent/model/openai"
)

// Model choices of --model.
const (
	modelOffline         = "offline"
	modelOpenAIChat      = "openai-chat"
	modelOpenAIResponses = "openai-responses"
)

var modelChoices = []string{modelOffline, modelOpenAIChat, modelOpenAIResponses}

// apiKeyEnv is where the OpenAI-compatible clients' key comes from; keys
// are never taken from flags, which other users of the machine can read.
const apiKeyEnv = "OPENAI_API_KEY"

// modelConfig holds the model flags of chat.
type modelConfig struct {
	kind      string
	baseURL   string
	modelName string
	fs        *flags // to tell a flag given from its default
}

func modelFlags(fs *flags) *modelConfig {
	mc := &modelConfig{fs: fs}
	fs.StringVar(&mc.kind, "model", modelOffline, "model `SERVICE`: "+strings.Join(modelChoices, ", "))
	fs.StringVar(&mc.baseURL, "base-url", "", "`URL` of an OpenAI-compatible API, with its /v1 path")
	fs.StringVar(&mc.modelName, "model-name", openai.DefaultModel, "the model `NAME` to ask an OpenAI-compatible service for")
	return mc
}

// client returns the model client the flags choose.
func (mc *modelConfig) client(e *env, cmd string) (model.Client, error) {
	if !slices.Contains(modelChoices, mc.kind) {
		return nil, usagef(cmd, "--model %q is not a model this command knows: use %s", mc.kind, strings.Join(modelChoices, ", "))
	}
	if mc.kind == modelOffline {
		if mc.fs.given("model-name") {
			return nil, usagef(cmd, "--model-name is for the openai models, and --model is offline: add --model %s or --model %s, or drop --model-name", modelOpenAIChat, modelOpenAIResponses)
		}
		if mc.baseURL != "" {
			return nil, usagef(cmd, "--base-url is for the openai models, and --model is offline: add --model %s or --model %s", modelOpenAIChat, modelOpenAIResponses)
		}
		return offline.New(), nil
	}
	key := e.getenv(apiKeyEnv)
	if key == "" && mc.baseURL == "" {
		return nil, usagef(cmd, "--model %s talks to %s, which needs a key: set %s, or pass --base-url for a local OpenAI-compatible server",
			mc.kind, openai.DefaultBaseURL, apiKeyEnv)
	}
	o := openai.Options{BaseURL: mc.baseURL, APIKey: key, Model: mc.modelName, MaxRetries: 2}
	if mc.kind == modelOpenAIChat {
		return openai.NewChat(o), nil
	}
	return openai.NewResponses(o), nil
}

// storesHistory reports whether the chosen service keeps the conversation
// itself.
func (mc *modelConfig) storesHistory() bool { return mc.kind == modelOpenAIResponses }

// tools are the offline model's clock and calculator, offered to every
// model so that any of them can run the tool loop.
func tools() []agent.Tool {
	var out []agent.Tool
	for _, t := range offline.Tools(nil) {
		out = append(out, agent.Tool(t))
	}
	return out
}
