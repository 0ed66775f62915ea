package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigilhq/vigil/detect"
	"github.com/vigilhq/vigil/internal/lazyregexp"
	"go.yaml.in/yaml/v3"
)

// The configuration file (docs/configuration.md): YAML from --config or
// VIGIL_CONFIG, else the first existing of ./vigil.yaml and
// ~/.vigil/config.yaml. Precedence is flags > environment > file >
// defaults, so commands use the file's values as the defaults of their
// environment lookups (see envOr calls taking a fileConfig value).
//
// Every key of the file is accepted and type-checked, nested keys included; an
// unknown key at any depth is an error naming its dotted path and line,
// with a suggestion, so a typo never silently does nothing. What takes
// effect in this build (inEffect) is: listen, data_dir, db, tls, log,
// cors_origins, auth.admin_username, auth.anonymous_read_public, sharing,
// metrics, ledger.key_file, detectors, guardrails, monitors, ask and gateway
// (limits: see the Limits field), auth.session_ttl and auth.secure_cookies
// (browser sessions of the web UI), and otlp and limits.max_otlp_bytes
// (OTLP ingest). ledger.close_idle_after applies to a part not in this
// build: it is validated and otherwise unused, and
// vigil serve logs which of them the file sets.
//
// Each section has its own type below, so sections change independently.

// fileConfig is the configuration file.
type fileConfig struct {
	path string // the file it came from; "" when there is none
	// keys holds the dotted path of every key the file sets.
	keys []string

	Listen  string `yaml:"listen"`
	DataDir string `yaml:"data_dir"`
	DB      string `yaml:"db"`
	Log     struct {
		Level  enum `yaml:"level"`
		Format enum `yaml:"format"`
	} `yaml:"log"`
	Ledger struct {
		KeyFile        string   `yaml:"key_file"`
		CloseIdleAfter duration `yaml:"close_idle_after"`
	} `yaml:"ledger"`
	Detectors struct {
		BaseURL string   `yaml:"base_url"`
		APIKey  string   `yaml:"api_key"`
		Timeout duration `yaml:"timeout"`
	} `yaml:"detectors"`
	Metrics struct {
		Token  string `yaml:"token"`
		Public *bool  `yaml:"public"`
	} `yaml:"metrics"`
	TLS         tlsConfig        `yaml:"tls"`
	CORSOrigins []string         `yaml:"cors_origins"`
	Auth        authConfig       `yaml:"auth"`
	Sharing     sharingConfig    `yaml:"sharing"`
	Limits      limitsConfig     `yaml:"limits"`
	OTLP        otlpConfig       `yaml:"otlp"`
	Guardrails  guardrailsConfig `yaml:"guardrails"`
	Monitors    monitorsConfig   `yaml:"monitors"`
	Gateway     gatewayConfig    `yaml:"gateway"`
	Ask         askConfig        `yaml:"ask"`
}

// limitsConfig is the limits section: request body sizes and the
// server's admission limits (vigil serve). Zero values mean the defaults.
type limitsConfig struct {
	MaxJSONBytes         size     `yaml:"max_json_bytes"`
	MaxUploadBytes       size     `yaml:"max_upload_bytes"`
	MaxOTLPBytes         size     `yaml:"max_otlp_bytes"`
	BodyIdleTimeout      duration `yaml:"body_idle_timeout"`
	MaxConnections       int      `yaml:"max_connections"`
	MaxInflightBodyBytes size     `yaml:"max_inflight_body_bytes"`
}

// monitorsConfig is the monitors section: the workers that run dataset
// guardrails on every trace write (0: GOMAXPROCS; -1: none, the queue
// keeps the jobs), each evaluation's wall-time budget (0: 10 s) and the
// lease after which a dead process's jobs are taken over (0: 30 s).
type monitorsConfig struct {
	Workers *int     `yaml:"workers"`
	Timeout duration `yaml:"timeout"`
	Lease   duration `yaml:"lease"`
}

// tlsConfig is the tls section: with both files set, vigil serve speaks
// HTTPS.
type tlsConfig struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// authConfig is the auth section (docs/configuration.md).
// SessionTTL and SecureCookies apply to browser sessions (the web UI).
type authConfig struct {
	AdminUsername       string   `yaml:"admin_username"`
	AnonymousReadPublic *bool    `yaml:"anonymous_read_public"`
	SessionTTL          duration `yaml:"session_ttl"`
	SecureCookies       bool     `yaml:"secure_cookies"`
}

// sharingConfig is the sharing section (link sharing of traces).
type sharingConfig struct {
	Enabled *bool `yaml:"enabled"`
}

// otlpConfig is the otlp section (OTLP ingest, package otlp; serve_otlp.go).
type otlpConfig struct {
	Enabled        *bool  `yaml:"enabled"`
	DefaultDataset string `yaml:"default_dataset"`
}

// guardrailsConfig is the guardrails section: the check API's rule cache
// size (0: 1024) and whether it needs an API key (default true).
type guardrailsConfig struct {
	CacheSize        int   `yaml:"cache_size"`
	CheckRequiresKey *bool `yaml:"check_requires_key"`
}

// gatewayConfig is the gateway section of the configuration file
// (gatewaycfg.go applies it with the environment and flags).
type gatewayConfig struct {
	Enabled               *bool             `yaml:"enabled"`
	Listen                string            `yaml:"listen"`
	StoreURL              string            `yaml:"store_url"`
	RequireKey            bool              `yaml:"require_key"`
	DefaultDataset        string            `yaml:"default_dataset"`
	GuardrailsFile        string            `yaml:"guardrails_file"`
	GlobalGuardrails      []gatewayRule     `yaml:"global_guardrails"`
	HeaderGuardrails      enum              `yaml:"header_guardrails"`
	InputCheck            enum              `yaml:"input_check"`
	EvalTimeout           duration          `yaml:"eval_timeout"`
	FailMode              enum              `yaml:"fail_mode"`
	ExposeRuleContent     *bool             `yaml:"expose_rule_content"`
	OpenAIErrorFormat     enum              `yaml:"openai_error_format"`
	OpenAI                gatewayOpenAI     `yaml:"openai"`
	Stream                gatewayStream     `yaml:"stream"`
	SessionStitching      enum              `yaml:"session_stitching"`
	SessionIdleTimeout    duration          `yaml:"session_idle_timeout"`
	MaxSessions           int               `yaml:"max_sessions"`
	SessionGuardrailScope enum              `yaml:"session_guardrail_scope"`
	Record                gatewayRecord     `yaml:"record"`
	MaxRequestBytes       size              `yaml:"max_request_bytes"`
	Upstreams             []gatewayUpstream `yaml:"upstreams"`
	MCP                   gatewayMCP        `yaml:"mcp"`
}

type gatewayOpenAI struct {
	ForceStreamUsage bool `yaml:"force_stream_usage"`
}

type gatewayRule struct {
	Name     string `yaml:"name"`
	Content  string `yaml:"content"`
	File     string `yaml:"file"`
	Action   enum   `yaml:"action"`
	Severity string `yaml:"severity"`
	Scope    any    `yaml:"scope"`
}

type gatewayStream struct {
	Mode               enum     `yaml:"mode"`
	HoldbackChars      int      `yaml:"holdback_chars"`
	CheckIntervalChars int      `yaml:"check_interval_chars"`
	CheckMaxDelay      duration `yaml:"check_max_delay"`
	Keepalive          duration `yaml:"keepalive"`
	OverheadComment    bool     `yaml:"overhead_comment"`
}

type gatewayRecord struct {
	QueueSize int  `yaml:"queue_size"`
	OnFull    enum `yaml:"on_full"`
}

type gatewayUpstream struct {
	Name              string            `yaml:"name"`
	Type              enum              `yaml:"type"`
	BaseURL           string            `yaml:"base_url"`
	APIVersion        string            `yaml:"api_version"`
	Auth              enum              `yaml:"auth"`
	APIKeyEnv         string            `yaml:"api_key_env"`
	Headers           map[string]string `yaml:"headers"`
	Timeout           duration          `yaml:"timeout"`
	StreamIdleTimeout duration          `yaml:"stream_idle_timeout"`
}

type gatewayMCP struct {
	Servers               []gatewayMCPServer `yaml:"servers"`
	AllowedUpstreamHosts  []string           `yaml:"allowed_upstream_hosts"`
	AllowedOrigins        []string           `yaml:"allowed_origins"`
	RugPullAction         enum               `yaml:"rug_pull_action"`
	FailureResponseFormat enum               `yaml:"failure_response_format"`
}

type gatewayMCPServer struct {
	Name    string            `yaml:"name"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	Timeout duration          `yaml:"timeout"`
}

// enums are the enumerated keys and their allowed values (checked after
// decoding, with the key's line).
func (c *fileConfig) enums() []enumCheck {
	g := &c.Gateway
	checks := []enumCheck{
		{"log.level", c.Log.Level, []string{"debug", "info", "warn", "error"}},
		{"log.format", c.Log.Format, []string{"text", "json"}},
		{"gateway.header_guardrails", g.HeaderGuardrails, []string{"merge", "replace", "ignore"}},
		{"gateway.input_check", g.InputCheck, []string{"concurrent", "before"}},
		{"gateway.fail_mode", g.FailMode, []string{"closed", "open"}},
		{"gateway.openai_error_format", g.OpenAIErrorFormat, []string{"invariant", "native"}},
		{"gateway.stream.mode", g.Stream.Mode, []string{"incremental", "buffer", "passthrough"}},
		{"gateway.session_stitching", g.SessionStitching, []string{"auto", "header", "off"}},
		{"gateway.session_guardrail_scope", g.SessionGuardrailScope, []string{"request", "session"}},
		{"gateway.record.on_full", g.Record.OnFull, []string{"drop", "block"}},
		{"gateway.mcp.rug_pull_action", g.MCP.RugPullAction, []string{"block", "log"}},
		{"gateway.mcp.failure_response_format", g.MCP.FailureResponseFormat, []string{"error", "content"}},
	}
	for i, r := range g.GlobalGuardrails {
		checks = append(checks, enumCheck{fmt.Sprintf("gateway.global_guardrails[%d].action", i), r.Action, []string{"block", "log"}})
	}
	for i, u := range g.Upstreams {
		checks = append(checks,
			enumCheck{fmt.Sprintf("gateway.upstreams[%d].type", i), u.Type, []string{"openai", "azure-openai", "anthropic", "gemini"}},
			enumCheck{fmt.Sprintf("gateway.upstreams[%d].auth", i), u.Auth, []string{"passthrough", "inject", "none"}})
	}
	return checks
}

// validate checks what decoding cannot: enumerations, names and keys that
// go together.
func (c *fileConfig) validate() error {
	for _, e := range c.enums() {
		if e.v.Value != "" && !slices.Contains(e.allowed, e.v.Value) {
			return fmt.Errorf("line %d: %s is %q, want one of %s", e.v.line, e.key, e.v.Value, strings.Join(e.allowed, ", "))
		}
	}
	if u := c.Auth.AdminUsername; u != "" && !usernameRx.MatchString(u) {
		return fmt.Errorf("auth.admin_username %q: want 1 to 64 of A-Z, a-z, 0-9, '_', '.', '-'", u)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return errors.New("tls: set both cert_file and key_file, or neither")
	}
	if c.Guardrails.CacheSize < 0 {
		return fmt.Errorf("guardrails.cache_size is %d, want 0 (the default, 1024) or more", c.Guardrails.CacheSize)
	}
	if w := c.Monitors.Workers; w != nil && *w < -1 {
		return fmt.Errorf("monitors.workers is %d, want -1 (none), 0 (the default, one per CPU) or more", *w)
	}
	for i, o := range c.CORSOrigins {
		if err := checkOrigin(o); err != nil {
			return fmt.Errorf("cors_origins[%d]: %w", i, err)
		}
	}
	return nil
}

// usernameRx is the username syntax of the API (docs/api.md).
var usernameRx = lazyregexp.New(`^[a-zA-Z0-9_.-]{1,64}$`)

// checkOrigin accepts "*" or a browser origin: scheme://host[:port],
// without a path.
func checkOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%q is not an origin such as https://app.example.com (or *)", o)
	}
	return nil
}

// enumCheck is one enumerated key.
type enumCheck struct {
	key     string
	v       enum
	allowed []string
}

// enum is a string scalar that remembers its line for validate.
type enum struct {
	Value string
	line  int
}

func (e *enum) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a word, got a %s", n.Line, nodeKind(n))
	}
	e.Value, e.line = n.Value, n.Line
	return nil
}

// size is a byte count: a number, or a number with KiB, MiB or GiB.
type size int64

func (s *size) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseSize(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %q is not a size such as 32MiB", n.Line, n.Value)
	}
	*s = size(v)
	return nil
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

// inEffect are the keys (or sections) this build reads; any other key the
// file sets is accepted and reported by notInEffect.
var inEffect = []string{
	"listen", "data_dir", "db", "tls", "log", "cors_origins", "auth.admin_username",
	"auth.anonymous_read_public", "sharing", "limits.max_json_bytes", "limits.max_upload_bytes",
	"limits.body_idle_timeout", "limits.max_connections", "limits.max_inflight_body_bytes", "metrics", "ledger.key_file", "detectors",
	"guardrails", "monitors", "otlp", "limits.max_otlp_bytes",
	"ask", "gateway",
	"auth.session_ttl", "auth.secure_cookies", // browser sessions of the web UI
}

// notInEffect returns the keys the file sets that this build does not use;
// a section is named once (gateway, not each of its keys).
func (c *fileConfig) notInEffect() []string {
	var out []string
	under := func(k, p string) bool {
		return k == p || strings.HasPrefix(k, p+".") || strings.HasPrefix(k, p+"[")
	}
	for _, k := range c.keys {
		if slices.ContainsFunc(inEffect, func(p string) bool { return under(k, p) || under(p, k) }) ||
			slices.ContainsFunc(out, func(p string) bool { return under(k, p) }) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// duration is a Go duration written as a string ("10s") in YAML.
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a duration such as 10s", n.Line)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration such as 10s", n.Line, s)
	}
	*d = duration(v)
	return nil
}

// configFlag returns the value of --config (or -config) in args, without
// parsing the other flags: the file must be read before the flags are
// defined, because its values are their defaults.
func configFlag(args []string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		for _, p := range []string{"--config", "-config"} {
			if a == p && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, p+"="); ok {
				return v
			}
		}
	}
	return ""
}

// loadConfig reads the configuration file: explicit (from --config) if
// set, else $VIGIL_CONFIG, else the first existing default location. A
// missing explicit file is an error; missing default files are not.
func loadConfig(explicit string) (*fileConfig, error) {
	path, required := explicit, true
	if path == "" {
		path = os.Getenv("VIGIL_CONFIG")
	}
	if path == "" {
		required = false
		candidates := []string{"vigil.yaml"}
		if home, err := os.UserHomeDir(); err == nil {
			candidates = append(candidates, filepath.Join(home, ".vigil", "config.yaml"))
		}
		for _, c := range candidates {
			if _, err := os.Stat(c); err == nil {
				path = c
				break
			}
		}
	}
	cfg := &fileConfig{}
	if path == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if !required && errors.Is(err, fs.ErrNotExist) {
			return cfg, nil
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := decodeConfig(data, cfg); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	cfg.path = path
	return cfg, nil
}

// decodeConfig decodes YAML data into cfg, rejecting unknown top-level keys.
func decodeConfig(data []byte, cfg *fileConfig) error {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file
		}
		return err
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: the configuration must be a mapping of keys (listen: ..., db: ...)", root.Line)
	}
	keys, err := checkKeys(root, reflect.TypeOf(*cfg), "")
	if err != nil {
		return err
	}
	if err := root.Decode(cfg); err != nil {
		return err
	}
	cfg.keys = keys
	return cfg.validate()
}

// checkKeys checks every mapping key under n against the yaml tags of t,
// recursively (structs, lists of structs), and returns the dotted paths of
// the keys set. An unknown key is an error naming its path and line, with
// the closest known key when one is near.
func checkKeys(n *yaml.Node, t reflect.Type, path string) ([]string, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch {
	case t == reflect.TypeFor[yaml.Node]():
		return nil, nil // a section another part of the code reads
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		var keys []string
		for i, el := range n.Content {
			k, err := checkKeys(el, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			keys = append(keys, k...)
		}
		return keys, nil
	case t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode || reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()):
		return nil, nil // a scalar, a map, or a type error that Decode reports
	}
	fields := map[string]reflect.Type{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = f.Type
		names = append(names, name)
	}
	var keys []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		full := k.Value
		if path != "" {
			full = path + "." + k.Value
		}
		ft, ok := fields[k.Value]
		if !ok {
			msg := fmt.Sprintf("line %d: unknown key %q", k.Line, full)
			if s := closest(k.Value, names); s != "" {
				if path != "" {
					s = path + "." + s
				}
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			return nil, errors.New(msg)
		}
		keys = append(keys, full)
		if err := checkValue(n.Content[i+1], ft, full); err != nil {
			return nil, err
		}
		sub, err := checkKeys(n.Content[i+1], ft, full)
		if err != nil {
			return nil, err
		}
		keys = append(keys, sub...)
	}
	return keys, nil
}

// checkValue checks that the value v of key fits the field type t, so
// that a value of the wrong type is an error naming the key and its line
// (the YAML decoder's own says only "line 1: cannot unmarshal !!seq into
// string"). Structs and lists of structs are checked key by key by
// checkKeys; an empty value (null) leaves the default.
func checkValue(v *yaml.Node, t reflect.Type, key string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	fail := func(want string) error {
		got := "a " + nodeKind(v)
		if v.Kind == yaml.ScalarNode {
			got = strconv.Quote(v.Value)
		}
		return fmt.Errorf("line %d: %s is %s, want %s", v.Line, key, got, want)
	}
	switch t {
	case reflect.TypeFor[yaml.Node]():
		return nil
	case reflect.TypeFor[size]():
		if _, err := parseSize(v.Value); err != nil || v.Kind != yaml.ScalarNode {
			return fail("a size such as 32MiB")
		}
		return nil
	case reflect.TypeFor[duration]():
		if d, err := time.ParseDuration(v.Value); err != nil || d < 0 || v.Kind != yaml.ScalarNode {
			return fail("a duration such as 10s")
		}
		return nil
	case reflect.TypeFor[enum]():
		if v.Kind != yaml.ScalarNode {
			return fail("a word")
		}
		return nil
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64:
		want := map[reflect.Kind]string{reflect.String: "a string", reflect.Bool: "true or false", reflect.Int: "a whole number", reflect.Int64: "a whole number"}[t.Kind()]
		if v.Kind != yaml.ScalarNode || v.Decode(reflect.New(t).Interface()) != nil {
			return fail(want)
		}
	case reflect.Slice:
		if v.Kind != yaml.SequenceNode {
			return fail("a list")
		}
		for i, el := range v.Content {
			if err := checkValue(el, t.Elem(), fmt.Sprintf("%s[%d]", key, i)); err != nil {
				return err
			}
		}
	case reflect.Struct, reflect.Map:
		if v.Kind != yaml.MappingNode {
			return fail("a mapping of keys")
		}
		if t.Kind() == reflect.Map {
			for i := 0; i+1 < len(v.Content); i += 2 {
				if err := checkValue(v.Content[i+1], t.Elem(), key+"."+v.Content[i].Value); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// configUsage is the help text of every command's --config flag.
const configUsage = "configuration `file` (default $VIGIL_CONFIG, else ./vigil.yaml, else ~/.vigil/config.yaml)"

// detectorConfig is the model-provider configuration of the file,
// overridden by the VIGIL_DETECTORS_* environment variables.
func (c *fileConfig) detectorConfig() (detect.Config, error) {
	d := detect.Config{BaseURL: c.Detectors.BaseURL, APIKey: c.Detectors.APIKey, Timeout: time.Duration(c.Detectors.Timeout)}
	env, err := detect.ConfigFromEnv(os.Getenv)
	if err != nil {
		return d, err
	}
	if env.BaseURL != "" {
		d.BaseURL = env.BaseURL
	}
	if env.APIKey != "" {
		d.APIKey = env.APIKey
	}
	if env.Timeout != 0 {
		d.Timeout = env.Timeout
	}
	return d, nil
}
