package mcp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// everythingServer is Vigil's own MCP server implementing the server
// scenarios of the MCP conformance suite (@modelcontextprotocol/
// conformance): tools with every content type, logging, progress,
// sampling, elicitation, resources and templates, subscriptions, prompts
// and completion. The conformance test runs the suite against it
// directly and through the proxy.
func everythingServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "vigil-everything", Version: "1.0.0"}, &sdk.ServerOptions{
		CompletionHandler: func(ctx context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
			var vals []string
			for _, c := range []string{"paris", "park", "party"} {
				if strings.HasPrefix(c, req.Params.Argument.Value) {
					vals = append(vals, c)
				}
			}
			if vals == nil {
				vals = []string{}
			}
			return &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: vals, Total: len(vals)}}, nil
		},
		SubscribeHandler:   func(context.Context, *sdk.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
		Capabilities: &sdk.ServerCapabilities{
			Logging:     &sdk.LoggingCapabilities{},
			Completions: &sdk.CompletionCapabilities{},
		},
	})
	noArgs := json.RawMessage(`{"type":"object","properties":{}}`)
	text := func(t string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: t}}}
	}
	tool := func(name, desc string, schema any, h sdk.ToolHandler) {
		if schema == nil {
			schema = noArgs
		}
		s.AddTool(&sdk.Tool{Name: name, Description: desc, InputSchema: schema}, h)
	}
	tool("test_simple_text", "Returns simple text", nil, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return text("This is a simple text response for testing."), nil
	})
	tool("test_image_content", "Returns an image", nil, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{Data: redPixelPNG, MIMEType: "image/png"}}}, nil
	})
	tool("test_audio_content", "Returns audio", nil, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{Data: silentWAV, MIMEType: "audio/wav"}}}, nil
	})
	tool("test_embedded_resource", "Returns an embedded resource", nil, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."}}}}, nil
	})
	tool("test_multiple_content_types", "Returns text, image and resource", nil, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "Multiple content types test:"},
			&sdk.ImageContent{Data: redPixelPNG, MIMEType: "image/png"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}},
		}}, nil
	})
	tool("test_tool_with_logging", "Logs while it runs", nil, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		for i, m := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			if err := req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Data: m}); err != nil {
				return nil, err
			}
		}
		return text("Tool with logging executed successfully"), nil
	})
	tool("test_tool_with_progress", "Reports progress", nil, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		tok := req.Params.GetProgressToken()
		for i, p := range []float64{0, 50, 100} {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			if tok != nil {
				if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: p, Total: 100}); err != nil {
					return nil, err
				}
			}
		}
		return text("Tool with progress executed successfully"), nil
	})
	tool("test_error_handling", "Always fails", nil, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "This tool intentionally returns an error for testing"}}}, nil
	})
	tool("test_sampling", "Asks the client's model", json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}`),
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ Prompt string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			res, err := req.Session.CreateMessage(ctx, &sdk.CreateMessageParams{MaxTokens: 100,
				Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: in.Prompt}}}})
			if err != nil {
				return nil, fmt.Errorf("sampling: %w", err)
			}
			out := ""
			if tc, ok := res.Content.(*sdk.TextContent); ok {
				out = tc.Text
			}
			return text("LLM response: " + out), nil
		})
	elicit := func(ctx context.Context, req *sdk.CallToolRequest, msg string, schema any) (*sdk.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: msg, RequestedSchema: schema})
		if err != nil {
			return nil, fmt.Errorf("elicitation: %w", err)
		}
		c, _ := json.Marshal(res.Content)
		return text(fmt.Sprintf("Elicitation completed: action=%s, content=%s", res.Action, c)), nil
	}
	tool("test_elicitation", "Asks the user", json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`),
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ Message string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return elicit(ctx, req, in.Message, json.RawMessage(`{"type":"object","properties":{
				"username":{"type":"string","description":"User's response"},
				"email":{"type":"string","description":"User's email address"}},"required":["username","email"]}`))
		})
	tool("test_elicitation_sep1034_defaults", "Elicitation with defaults", nil, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return elicit(ctx, req, "Please review and update the form fields with defaults", json.RawMessage(`{"type":"object","properties":{
			"name":{"type":"string","description":"User name","default":"John Doe"},
			"age":{"type":"integer","description":"User age","default":30},
			"score":{"type":"number","description":"User score","default":95.5},
			"status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},
			"verified":{"type":"boolean","description":"Verification status","default":true}}}`))
	})
	tool("test_elicitation_sep1330_enums", "Elicitation with enums", nil, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return elicit(ctx, req, "Please select options from the enum fields", json.RawMessage(`{"type":"object","properties":{
			"untitledSingle":{"type":"string","enum":["option1","option2","option3"]},
			"titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},
			"legacyEnum":{"type":"string","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},
			"untitledMulti":{"type":"array","items":{"type":"string","enum":["option1","option2","option3"]}},
			"titledMulti":{"type":"array","items":{"anyOf":[{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}}}`))
	})
	tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", json.RawMessage(`{
		"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"$defs":{"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},
		"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"}},"additionalProperties":false}`),
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text("ok"), nil
		})
	tool("test_reconnection", "Closes its SSE stream mid-call", nil, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if req.Extra != nil && req.Extra.CloseSSEStream != nil {
			req.Extra.CloseSSEStream(sdk.CloseSSEStreamArgs{RetryAfter: 500 * time.Millisecond})
		}
		time.Sleep(100 * time.Millisecond)
		return text("Reconnection test completed successfully"), nil
	})

	tool("test_roots", "Lists the client's roots", nil, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("roots: %w", err)
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return text("roots: " + strings.Join(uris, ",")), nil
	})

	// Resources.
	s.AddResource(&sdk.Resource{URI: "test://static-text", Name: "static-text", Description: "A static text resource", MIMEType: "text/plain"},
		func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: "test://static-text", MIMEType: "text/plain", Text: "This is the content of the static text resource."}}}, nil
		})
	s.AddResource(&sdk.Resource{URI: "test://static-binary", Name: "static-binary", Description: "A static binary resource", MIMEType: "image/png"},
		func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: "test://static-binary", MIMEType: "image/png", Blob: redPixelPNG}}}, nil
		})
	s.AddResource(&sdk.Resource{URI: "test://watched-resource", Name: "watched-resource", Description: "A resource to subscribe to", MIMEType: "text/plain"},
		func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: "test://watched-resource", MIMEType: "text/plain", Text: "watched"}}}, nil
		})
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template", Description: "A resource template", MIMEType: "application/json"},
		func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(req.Params.URI, "test://template/"), "/data")
			if id == "" || strings.Contains(id, "/") {
				return nil, sdk.ResourceNotFoundError(req.Params.URI)
			}
			body, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(body)}}}, nil
		})

	// Prompts.
	prompt := func(p *sdk.Prompt, h sdk.PromptHandler) { s.AddPrompt(p, h) }
	userText := func(t string) *sdk.PromptMessage {
		return &sdk.PromptMessage{Role: "user", Content: &sdk.TextContent{Text: t}}
	}
	prompt(&sdk.Prompt{Name: "test_simple_prompt", Description: "A simple prompt"}, func(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{userText("This is a simple prompt for testing.")}}, nil
	})
	prompt(&sdk.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with arguments", Arguments: []*sdk.PromptArgument{
		{Name: "arg1", Description: "First test argument", Required: true}, {Name: "arg2", Description: "Second test argument", Required: true}}},
		func(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			a := req.Params.Arguments
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{userText(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"]))}}, nil
		})
	prompt(&sdk.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt with a resource", Arguments: []*sdk.PromptArgument{
		{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			uri := req.Params.Arguments["resourceUri"]
			if uri == "" {
				return nil, errors.New("resourceUri is required")
			}
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{
				{Role: "user", Content: &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: uri, MIMEType: "text/plain", Text: "Embedded resource content for testing."}}},
				userText("Please process the embedded resource above."),
			}}, nil
		})
	prompt(&sdk.Prompt{Name: "test_prompt_with_image", Description: "A prompt with an image"}, func(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{
			{Role: "user", Content: &sdk.ImageContent{Data: redPixelPNG, MIMEType: "image/png"}},
			userText("Please analyze the image above."),
		}}, nil
	})
	return s
}

// A 1x1 red PNG and a 44-byte silent WAV header with one sample.
var (
	redPixelPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
	silentWAV, _   = base64.StdEncoding.DecodeString("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA==")
)
