package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vigilhq/vigil/detect"
	"go.yaml.in/yaml/v3"
)

// The configuration file of spec/gateway.md §10: YAML from --config or
// VIGIL_CONFIG, else the first existing of ./vigil.yaml and
// ~/.vigil/config.yaml. Precedence is flags > environment > file >
// defaults, so commands use the file's values as the defaults of their
// environment lookups (see envOr calls taking a fileConfig value).
//
// Only the keys that the commands implement so far are read; the other
// top-level sections of §10 are accepted (a file written for the whole
// product must load) and ignored. An unknown top-level key is an error with
// a suggestion, so a typo never silently does nothing.

// fileConfig is the part of the configuration file the commands read.
type fileConfig struct {
	path string // the file it came from; "" when there is none

	Listen  string `yaml:"listen"`
	DataDir string `yaml:"data_dir"`
	DB      string `yaml:"db"`
	Log     struct {
		Level  string `yaml:"level"`
		Format string `yaml:"format"`
	} `yaml:"log"`
	Ledger struct {
		KeyFile string `yaml:"key_file"`
	} `yaml:"ledger"`
	Detectors struct {
		BaseURL string   `yaml:"base_url"`
		APIKey  string   `yaml:"api_key"`
		Timeout duration `yaml:"timeout"`
	} `yaml:"detectors"`
	Metrics struct {
		Token string `yaml:"token"`
	} `yaml:"metrics"`
	Limits limitsConfig `yaml:"limits"`
}

// limitsConfig is the limits section: request body sizes and the
// server's admission limits (vigil serve). Zero values mean the defaults.
type limitsConfig struct {
	MaxJSONBytes         byteSize `yaml:"max_json_bytes"`
	MaxUploadBytes       byteSize `yaml:"max_upload_bytes"`
	BodyIdleTimeout      duration `yaml:"body_idle_timeout"`
	MaxConnections       int      `yaml:"max_connections"`
	MaxInflightBodyBytes byteSize `yaml:"max_inflight_body_bytes"`
}

// byteSize is a size in YAML: a number of bytes or a string with a
// KiB/MiB/GiB suffix ("64MiB").
type byteSize int64

func (b *byteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = byteSize(v)
	return nil
}

// configSections are the top-level keys of spec/gateway.md §10.
var configSections = []string{
	"listen", "data_dir", "db", "tls", "log", "cors_origins", "auth", "sharing", "limits",
	"metrics", "otlp", "guardrails", "ledger", "detectors", "gateway",
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
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		if slices.Contains(configSections, k.Value) {
			continue
		}
		msg := fmt.Sprintf("line %d: unknown key %q", k.Line, k.Value)
		if s := closest(k.Value, configSections); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return errors.New(msg)
	}
	return root.Decode(cfg)
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
