package detect

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/policy/builtin"
)

// The capabilities that need a model (policy-language §13.4). Each is a
// small interface so an embedding application can plug in its own
// implementation; HTTPProvider implements all of them against an
// OpenAI-compatible endpoint.

// Moderator flags harmful content (moderated, <MODERATED>).
type Moderator interface {
	// Moderate returns the category scores of text; model "" means the
	// provider's default.
	Moderate(ctx context.Context, model, text string) (Moderation, error)
}

// Moderation is the verdict of a Moderator on one text.
type Moderation struct {
	// Flagged is the provider's own verdict.
	Flagged bool
	// Scores maps category names (OpenAI's, e.g. "harassment") to scores
	// in [0, 1].
	Scores map[string]float64
}

// Embedder embeds texts (is_similar, embedding_similarity).
type Embedder interface {
	// Embed returns one vector per text, in order.
	Embed(ctx context.Context, model string, texts []string) ([][]float64, error)
}

// Completion is one question to an LLM.
type Completion struct {
	System      string  // system prompt; "" sends none
	Prompt      string  // the user message
	Model       string  // "" = provider default
	Temperature float64 // sampling temperature
	MaxTokens   int     // 0 = provider default
}

// Completer answers prompts (llm, llm_confirm, the semantic fallback of
// fuzzy_contains).
type Completer interface {
	Complete(ctx context.Context, c Completion) (string, error)
}

// EntityRecognizer finds named entities. OfflineNames is the built-in one
// for PERSON and LOCATION; an installed one (Providers.Entities, a model)
// replaces it and also answers entity types PII does not know.
type EntityRecognizer interface {
	// Entities returns the findings of the given types in text, with
	// code-point offsets.
	Entities(ctx context.Context, text string, types []string) ([]Match, error)
}

// InjectionClassifier scores prompt injection with a model
// (prompt_injection with model=...).
type InjectionClassifier interface {
	// InjectionScore returns the probability in [0, 1] that text contains
	// a prompt injection.
	InjectionScore(ctx context.Context, model, text string) (float64, error)
}

// Providers is the set of model-backed capabilities in use. A nil field
// is a capability without provider: loading a policy that needs it fails
// with the error of policy-language §13.4.
type Providers struct {
	Moderator Moderator           // moderated, <MODERATED>
	Embedder  Embedder            // is_similar, embedding_similarity
	LLM       Completer           // llm, llm_confirm, fuzzy_contains' semantic fallback
	Entities  EntityRecognizer    // pii's PERSON and LOCATION (nil: OfflineNames) and types PII does not know
	Injection InjectionClassifier // prompt_injection with model=...
}

var active atomic.Pointer[Providers]

// SetProviders installs the providers the registered detectors use (nil
// removes them all). Policies check availability when they load, so call
// it before loading policies.
func SetProviders(p *Providers) {
	active.Store(p)
	publishCapabilities(CurrentProviders())
}

// CurrentProviders returns the installed providers (never nil; fields may
// be nil).
func CurrentProviders() *Providers {
	if p := active.Load(); p != nil {
		return p
	}
	return &Providers{}
}

// ConfigKey is the configuration setting that provides the model-backed
// detectors (spec/gateway.md §10), named by the "has no provider" errors.
const ConfigKey = "detectors.base_url"

// Config configures the OpenAI-compatible HTTP provider. Its first three
// fields are the settings of spec/gateway.md §10 (detectors.base_url,
// detectors.api_key, detectors.timeout); the others have defaults.
type Config struct {
	// BaseURL of the OpenAI-compatible API, with or without the trailing
	// "/v1" (e.g. "https://api.openai.com/v1"). Empty: no provider.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer KEY" when not empty.
	APIKey string
	// Timeout bounds each HTTP attempt (default 10s).
	Timeout time.Duration
	// Retries is the number of further attempts after a network error, a
	// 429 or a 5xx answer (default 2; negative: none). Attempts are spaced
	// by Backoff, doubled each time (default 200ms), or by the server's
	// Retry-After when it is shorter than 10 s.
	Retries int
	Backoff time.Duration
	// Default models (used when a policy gives no model).
	ModerationModel string // default "omni-moderation-latest"
	EmbeddingModel  string // default "text-embedding-3-small"
	ChatModel       string // default "gpt-4o-mini"
	// CacheEntries bounds the response cache (default 1024 responses; an
	// embedding response is some 30 KB).
	CacheEntries int
}

// Environment variables read by ConfigFromEnv (VIGIL_ + the key path,
// spec/gateway.md §10).
const (
	EnvBaseURL = "VIGIL_DETECTORS_BASE_URL"
	EnvAPIKey  = "VIGIL_DETECTORS_API_KEY"
	EnvTimeout = "VIGIL_DETECTORS_TIMEOUT"
)

// ConfigFromEnv reads the detectors settings from the environment through
// getenv (os.Getenv). A malformed timeout is an error naming the variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{BaseURL: getenv(EnvBaseURL), APIKey: getenv(EnvAPIKey)}
	if t := getenv(EnvTimeout); t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive Go duration such as 10s", EnvTimeout, t)
		}
		c.Timeout = d
	}
	return c, nil
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Retries == 0 {
		c.Retries = 2
	}
	if c.Retries < 0 {
		c.Retries = 0
	}
	if c.Backoff <= 0 {
		c.Backoff = 200 * time.Millisecond
	}
	if c.ModerationModel == "" {
		c.ModerationModel = "omni-moderation-latest"
	}
	if c.EmbeddingModel == "" {
		c.EmbeddingModel = "text-embedding-3-small"
	}
	if c.ChatModel == "" {
		c.ChatModel = "gpt-4o-mini"
	}
	if c.CacheEntries <= 0 {
		c.CacheEntries = 1024
	}
	return c
}

// apiRoot returns the URL prefix of the /v1 endpoints.
func (c Config) apiRoot() (string, error) {
	u, err := url.Parse(c.BaseURL)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", ConfigKey, c.BaseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("%s %q: want an http:// or https:// URL", ConfigKey, c.BaseURL)
	}
	root := strings.TrimRight(c.BaseURL, "/")
	if !strings.HasSuffix(root, "/v1") {
		root += "/v1"
	}
	return root, nil
}

// Configure installs the HTTP provider for cfg as every capability, or
// removes the providers when cfg.BaseURL is empty. Providers are never
// contacted here.
func Configure(cfg Config) error {
	if cfg.BaseURL == "" {
		SetProviders(nil)
		return nil
	}
	p, err := NewHTTPProvider(cfg)
	if err != nil {
		return err
	}
	SetProviders(p.Providers())
	return nil
}

// RegisterFlags adds -detectors-base-url, -detectors-api-key and
// -detectors-timeout to fs, bound to c. Call it after filling c from the
// config file and ConfigFromEnv, so that flags take precedence
// (spec/gateway.md §10: flags > environment > config file > defaults).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.BaseURL, "detectors-base-url", c.BaseURL, "OpenAI-compatible endpoint for model-backed detectors (detectors.base_url; empty: none)")
	fs.StringVar(&c.APIKey, "detectors-api-key", c.APIKey, "API key for -detectors-base-url (detectors.api_key)")
	fs.DurationVar(&c.Timeout, "detectors-timeout", c.Timeout, "timeout of each model request (detectors.timeout; default 10s)")
}

// ConfigureFromEnv is Configure(ConfigFromEnv(os.Getenv)): what a command
// without its own configuration file calls before loading policies.
func ConfigureFromEnv() error {
	c, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	return Configure(c)
}

// piiPlan splits the entity types a pii call asks for (entities; all
// types when given is false) between the offline single pass and an
// installed EntityRecognizer. Without one, PII answers everything it
// knows, PERSON and LOCATION included (OfflineNames), and model is nil.
// With one, the recogniser answers PERSON and LOCATION (the model wins
// over the offline tables) and any requested type PII does not know;
// offline is nil when PII should report all its types.
func piiPlan(entities []string, given bool) (offline, model []string, rec EntityRecognizer) {
	rec = CurrentProviders().Entities
	if rec == nil {
		if !given {
			return nil, nil, nil
		}
		return entities, nil, nil
	}
	if !given {
		return offlineOnly, ModelEntities, rec
	}
	offline = []string{}
	for _, e := range entities {
		if containsStr(offlineOnly, e) {
			offline = append(offline, e)
		} else if !containsStr(model, e) {
			model = append(model, e)
		}
	}
	return offline, model, rec
}

// offlineOnly are the types PII answers even when a model recognises
// names and places.
var offlineOnly = []string{EntityEmail, EntityPhone, EntityCreditCard, EntityIBAN, EntityIP, EntitySSN, EntityURL, EntityCrypto}

// publishPIICapabilities tells the loader which pii entity types some
// recogniser reports: every built-in type always (capability
// "pii:TYPE"), and any other type when an EntityRecognizer is installed
// (builtin.CapPIIModel). The loader warns about a constant entities
// argument naming a type nothing reports.
func publishPIICapabilities(p *Providers) {
	for _, e := range OfflineEntities {
		builtin.SetCapability("pii:"+e, true)
	}
	builtin.SetCapability(builtin.CapPIIModel, p.Entities != nil)
}
