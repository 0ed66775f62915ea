package gateway

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// Upstream types (spec §4.1).
const (
	TypeOpenAI    = "openai"
	TypeAzure     = "azure-openai"
	TypeAnthropic = "anthropic"
	TypeGemini    = "gemini"
)

// Upstream auth modes (spec §3.2).
const (
	AuthPassthrough = "passthrough"
	AuthInject      = "inject"
	AuthNone        = "none"
)

// Upstream is one provider endpoint the gateway proxies to (spec §4.1).
type Upstream struct {
	Name       string
	Type       string // TypeOpenAI, TypeAzure, TypeAnthropic or TypeGemini; default: the name's built-in, else openai
	BaseURL    string
	APIVersion string // azure-openai
	Auth       string // passthrough (default), inject or none
	// APIKey is the key sent with Auth inject (read from api_key_env by
	// the caller). Never logged.
	APIKey  string
	Headers map[string]string
	// Timeout bounds a non-streaming call (default 600s);
	// StreamIdleTimeout the gap between streamed bytes (default 300s).
	Timeout           time.Duration
	StreamIdleTimeout time.Duration

	base *url.URL
}

var upstreamNameRx = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// builtins are the implicit upstreams; VIGIL_<NAME>_BASE_URL overrides
// their base URL.
func builtins() []Upstream {
	return []Upstream{
		{Name: "openai", Type: TypeOpenAI, BaseURL: envOr("VIGIL_OPENAI_BASE_URL", "https://api.openai.com/v1")},
		{Name: "anthropic", Type: TypeAnthropic, BaseURL: envOr("VIGIL_ANTHROPIC_BASE_URL", "https://api.anthropic.com")},
		{Name: "gemini", Type: TypeGemini, BaseURL: envOr("VIGIL_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com")},
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// resolveUpstreams merges the configured upstreams over the built-ins and
// checks them; errors name the upstream.
func resolveUpstreams(conf []Upstream) (map[string]*Upstream, error) {
	out := map[string]*Upstream{}
	for _, b := range builtins() {
		out[b.Name] = &b
	}
	for i, u := range conf {
		if !upstreamNameRx.MatchString(u.Name) || u.Name == "mcp" || u.Name == "health" || u.Name == "docs" {
			return nil, fmt.Errorf("gateway.upstreams[%d]: name %q: want ^[a-z][a-z0-9-]{0,31}$, not mcp, health or docs", i, u.Name)
		}
		if b := out[u.Name]; b != nil {
			if u.Type == "" {
				u.Type = b.Type
			}
			if u.BaseURL == "" {
				u.BaseURL = b.BaseURL
			}
		}
		if u.Type == "" {
			u.Type = TypeOpenAI
		}
		switch u.Type {
		case TypeOpenAI, TypeAzure, TypeAnthropic, TypeGemini:
		default:
			return nil, fmt.Errorf("gateway.upstreams[%d] (%s): type %q: want openai, azure-openai, anthropic or gemini", i, u.Name, u.Type)
		}
		switch u.Auth {
		case "":
			u.Auth = AuthPassthrough
		case AuthPassthrough, AuthInject, AuthNone:
		default:
			return nil, fmt.Errorf("gateway.upstreams[%d] (%s): auth %q: want passthrough, inject or none", i, u.Name, u.Auth)
		}
		if u.BaseURL == "" {
			return nil, fmt.Errorf("gateway.upstreams[%d] (%s): base_url is required", i, u.Name)
		}
		out[u.Name] = &u
	}
	for _, u := range out {
		if u.Auth == "" {
			u.Auth = AuthPassthrough
		}
		if u.Timeout <= 0 {
			u.Timeout = 600 * time.Second
		}
		if u.StreamIdleTimeout <= 0 {
			u.StreamIdleTimeout = 300 * time.Second
		}
		b, err := url.Parse(strings.TrimRight(u.BaseURL, "/"))
		if err != nil || (b.Scheme != "http" && b.Scheme != "https") || b.Host == "" {
			return nil, fmt.Errorf("upstream %s: base_url %q is not an http(s) URL", u.Name, u.BaseURL)
		}
		u.base = b
	}
	return out, nil
}

// target is the upstream URL of a client path after "{upstream}/", or ""
// when the upstream's type has no such route. kind is the route:
// "chat", "responses", "models", "messages" or "gemini".
func (u *Upstream) target(method, sub string, q url.Values) (target, kind string, status int, msg string) {
	base := u.base.String()
	switch u.Type {
	case TypeOpenAI, TypeAzure:
		switch {
		case sub == "chat/completions" && method == "POST":
			kind = "chat"
		case sub == "responses" && method == "POST":
			kind = "responses"
		case sub == "models" && method == "GET":
			kind = "models"
		default:
			return "", "", 404, ""
		}
		target = base + "/" + sub
		if u.Type == TypeAzure && u.APIVersion != "" {
			q.Set("api-version", u.APIVersion)
		}
	case TypeAnthropic:
		if sub != "v1/messages" || method != "POST" {
			return "", "", 404, ""
		}
		kind, target = "messages", base+"/v1/messages"
	case TypeGemini:
		parts := strings.SplitN(sub, "/", 3)
		if len(parts) != 3 || parts[1] != "models" || method != "POST" {
			return "", "", 404, ""
		}
		_, m, ok := strings.Cut(parts[2], ":")
		if !ok || (m != "generateContent" && m != "streamGenerateContent") {
			return "", "", 400, "Invalid endpoint - only generateContent and streamGenerateContent supported"
		}
		kind, target = "gemini", base+"/"+sub
	}
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	return target, kind, 0, ""
}
