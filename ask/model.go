package ask

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// The model client: OpenAI-compatible /v1/chat/completions with tool
// calls. Package detect's provider (the model-backed detectors) sends one
// prompt and caches answers by request; an agent needs a conversation
// with tools and must never be served a cached turn, so ask keeps this
// small client of its own, configured the same way (a base URL with or
// without /v1, a Bearer key).

// ConfigKey is the setting that configures the model, named by errors.
const ConfigKey = "ask.base_url"

// maxResponseBytes bounds a model response body.
const maxResponseBytes = 4 << 20

// chatClient sends chat completions to one endpoint.
type chatClient struct {
	url    string // …/v1/chat/completions
	key    string
	model  string
	client *http.Client
}

// newChatClient checks cfg.BaseURL and returns its client.
func newChatClient(cfg Config) (*chatClient, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", ConfigKey, cfg.BaseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%s %q: want an http:// or https:// URL", ConfigKey, cfg.BaseURL)
	}
	root := strings.TrimRight(cfg.BaseURL, "/")
	if !strings.HasSuffix(root, "/v1") {
		root += "/v1"
	}
	model := cfg.Model
	if model == "" {
		model = "gpt-4o-mini"
	}
	return &chatClient{url: root + "/chat/completions", key: cfg.APIKey, model: model, client: cfg.HTTPClient}, nil
}

// chatMessage is one message of a chat completion request or answer.
type chatMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	Tools       []chatTool    `json:"tools,omitempty"`
	Temperature float64       `json:"temperature"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
}

type chatResponse struct {
	Choices []struct {
		Message      chatMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// ErrModel is matched (errors.Is) by every error of the model endpoint.
var ErrModel = errors.New("model endpoint")

// complete sends one chat completion and returns its first choice.
func (c *chatClient) complete(ctx context.Context, req chatRequest) (*chatResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%w: encode request: %v", ErrModel, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModel, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		hr.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.client.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("%w: POST %s: %v", ErrModel, c.url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read answer of %s: %v", ErrModel, c.url, err)
	}
	if len(raw) > maxResponseBytes {
		return nil, fmt.Errorf("%w: answer of %s is larger than %d bytes", ErrModel, c.url, maxResponseBytes)
	}
	var out chatResponse
	jerr := json.Unmarshal(raw, &out)
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(raw[:min(len(raw), 300)]))
		if jerr == nil && out.Error != nil {
			msg = out.Error.Message
		}
		return nil, fmt.Errorf("%w: %s answered %d: %s", ErrModel, c.url, resp.StatusCode, msg)
	}
	if jerr != nil {
		return nil, fmt.Errorf("%w: answer of %s is not a chat completion: %v", ErrModel, c.url, jerr)
	}
	if len(out.Choices) == 0 {
		return nil, fmt.Errorf("%w: answer of %s has no choices", ErrModel, c.url)
	}
	return &out, nil
}
