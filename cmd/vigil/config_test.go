package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/detect"
)

func TestConfigFlag(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--config", "a.yaml", "--listen", "x"}, "a.yaml"},
		{[]string{"-config=b.yaml"}, "b.yaml"},
		{[]string{"--listen", "x", "--config=c.yaml"}, "c.yaml"},
		{[]string{"--", "--config", "d.yaml"}, ""},
		{[]string{"--config"}, ""},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := configFlag(tt.args); got != tt.want {
			t.Errorf("configFlag(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestDecodeConfig(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr string
		check   func(t *testing.T, c *fileConfig)
	}{
		{name: "empty", yaml: "", check: func(t *testing.T, c *fileConfig) {
			if c.Listen != "" || c.Detectors.BaseURL != "" {
				t.Errorf("empty file set values: %+v", c)
			}
		}},
		{name: "read keys", yaml: `
listen: 127.0.0.1:9999
data_dir: /srv/vigil
db: postgres://db/vigil
log: {level: info, format: json}
ledger:
  key_file: /etc/vigil/ledger.key
detectors:
  base_url: http://127.0.0.1:7000/v1
  api_key: sk-test
  timeout: 3s
gateway:            # the LLM gateway (vigil serve, vigil gateway)
  enabled: true
  upstreams: []
`, check: func(t *testing.T, c *fileConfig) {
			if c.Listen != "127.0.0.1:9999" || c.DataDir != "/srv/vigil" || c.DB != "postgres://db/vigil" ||
				c.Log.Format.Value != "json" || c.Ledger.KeyFile != "/etc/vigil/ledger.key" ||
				c.Detectors.BaseURL != "http://127.0.0.1:7000/v1" || c.Detectors.APIKey != "sk-test" ||
				time.Duration(c.Detectors.Timeout) != 3*time.Second {
				t.Errorf("decoded %+v", c)
			}
		}},
		{name: "limits", yaml: `
limits:
  max_json_bytes: 64MiB
  max_upload_bytes: 1073741824
  max_otlp_bytes: 16MiB   # decoded
  body_idle_timeout: 5s
  max_connections: 200
  max_inflight_body_bytes: 512MiB
`, check: func(t *testing.T, c *fileConfig) {
			want := limitsConfig{MaxJSONBytes: 64 << 20, MaxUploadBytes: 1 << 30, MaxOTLPBytes: 16 << 20, BodyIdleTimeout: duration(5 * time.Second),
				MaxConnections: 200, MaxInflightBodyBytes: 512 << 20}
			if c.Limits != want {
				t.Errorf("limits = %+v, want %+v", c.Limits, want)
			}
		}},
		{name: "bad size", yaml: "limits:\n  max_inflight_body_bytes: lots\n", wantErr: `line 2: limits.max_inflight_body_bytes is "lots", want a size such as 32MiB`},
		{name: "typo with suggestion", yaml: "listen: x\ndetector:\n  base_url: y\n", wantErr: `line 2: unknown key "detector" (did you mean "detectors"?)`},
		{name: "unknown without suggestion", yaml: "wibble: 1\n", wantErr: `unknown key "wibble"`},
		{name: "bad duration", yaml: "detectors:\n  timeout: soon\n", wantErr: `line 2: detectors.timeout is "soon", want a duration such as 10s`},
		{name: "not a mapping", yaml: "- a\n- b\n", wantErr: "line 1: the configuration must be a mapping"},
		{name: "sections read", yaml: `
tls: {cert_file: /c.pem, key_file: /k.pem}
cors_origins: [https://app.example.com, "http://127.0.0.1:3000"]
auth: {admin_username: root, anonymous_read_public: true, session_ttl: 1h, secure_cookies: true}
sharing: {enabled: false}
metrics: {token: t, public: true}
`, check: func(t *testing.T, c *fileConfig) {
			if c.TLS.CertFile != "/c.pem" || c.TLS.KeyFile != "/k.pem" || len(c.CORSOrigins) != 2 ||
				c.Auth.AdminUsername != "root" || c.Auth.AnonymousReadPublic == nil || !*c.Auth.AnonymousReadPublic ||
				time.Duration(c.Auth.SessionTTL) != time.Hour || !c.Auth.SecureCookies ||
				c.Sharing.Enabled == nil || *c.Sharing.Enabled || c.Metrics.Public == nil || !*c.Metrics.Public {
				t.Errorf("decoded %+v", c)
			}
			if got := strings.Join(c.notInEffect(), ","); got != "" {
				t.Errorf("notInEffect = %s", got)
			}
		}},
		{name: "nested unknown key", yaml: "auth:\n  admin_usrname: x\n", wantErr: `line 2: unknown key "auth.admin_usrname" (did you mean "auth.admin_username"?)`},
		{name: "deep unknown key", yaml: "gateway:\n  stream:\n    holdbak_chars: 3\n", wantErr: `line 3: unknown key "gateway.stream.holdbak_chars" (did you mean "gateway.stream.holdback_chars"?)`},
		{name: "unknown key in a list entry", yaml: "gateway:\n  upstreams:\n    - {name: a}\n    - {name: b, base_ur: x}\n", wantErr: `line 4: unknown key "gateway.upstreams[1].base_ur" (did you mean "gateway.upstreams[1].base_url"?)`},
		{name: "unknown ledger key", yaml: "ledger:\n  keyfile: x\n", wantErr: `unknown key "ledger.keyfile" (did you mean "ledger.key_file"?)`},
		{name: "enum", yaml: "gateway:\n  fail_mode: sometimes\n", wantErr: `line 2: gateway.fail_mode is "sometimes", want one of closed, open`},
		{name: "enum in a list", yaml: "gateway:\n  upstreams:\n    - {name: a, auth: magic}\n", wantErr: `line 3: gateway.upstreams[0].auth is "magic", want one of passthrough, inject, none`},
		{name: "log format", yaml: "log: {format: xml}\n", wantErr: `log.format is "xml", want one of text, json`},
		{name: "log level", yaml: "log:\n  level: loud\n", wantErr: `line 2: log.level is "loud"`},
		{name: "bool", yaml: "sharing: {enabled: maybe}\n", wantErr: `line 1: sharing.enabled is "maybe", want true or false`},
		{name: "size", yaml: "gateway: {max_request_bytes: lots}\n", wantErr: `line 1: gateway.max_request_bytes is "lots", want a size`},
		{name: "duration", yaml: "auth: {session_ttl: forever}\n", wantErr: `auth.session_ttl is "forever", want a duration`},
		// A value of the wrong type names its key (the decoder's own error
		// said only "cannot unmarshal !!seq into string").
		{name: "list for a string", yaml: "listen: [1]\n", wantErr: `line 1: listen is a list, want a string`},
		{name: "word for a number", yaml: "limits:\n  max_connections: many\n", wantErr: `line 2: limits.max_connections is "many", want a whole number`},
		{name: "word for a section", yaml: "limits: big\n", wantErr: `line 1: limits is "big", want a mapping of keys`},
		{name: "word for a list", yaml: "cors_origins: https://a.example\n", wantErr: `line 1: cors_origins is "https://a.example", want a list`},
		{name: "mapping in a list of strings", yaml: "cors_origins:\n  - {a: b}\n", wantErr: `line 2: cors_origins[0] is a mapping, want a string`},
		{name: "list for a size", yaml: "limits: {max_json_bytes: [1]}\n", wantErr: `line 1: limits.max_json_bytes is a list, want a size`},
		{name: "list for an enum", yaml: "log:\n  format: [json]\n", wantErr: `line 2: log.format is a list, want a word`},
		{name: "list for a header value", yaml: "gateway:\n  upstreams:\n    - {name: a, headers: {X-A: [1]}}\n", wantErr: `line 3: gateway.upstreams[0].headers.X-A is a list, want a string`},
		{name: "word for a list entry", yaml: "gateway:\n  upstreams: [openai]\n", wantErr: `line 2: gateway.upstreams[0] is "openai", want a mapping of keys`},
		{name: "empty values keep defaults", yaml: "db:\nlimits:\nlog: {format: }\n", check: func(t *testing.T, c *fileConfig) {
			if c.DB != "" || c.Limits != (limitsConfig{}) || c.Log.Format.Value != "" {
				t.Errorf("empty values set %+v", c)
			}
		}},
		{name: "origin", yaml: "cors_origins: [app.example.com]\n", wantErr: `cors_origins[0]: "app.example.com" is not an origin`},
		{name: "origin with path", yaml: "cors_origins: [\"https://a.example/x\"]\n", wantErr: `is not an origin`},
		{name: "admin username", yaml: "auth: {admin_username: 'bad name'}\n", wantErr: `auth.admin_username "bad name"`},
		{name: "half a tls pair", yaml: "tls: {key_file: k.pem}\n", wantErr: "tls: set both cert_file and key_file"},
		{name: "monitor workers", yaml: "monitors: {workers: -2}\n", wantErr: "monitors.workers is -2, want -1 (none)"},
		{name: "monitor lease", yaml: "monitors: {lease: -1s}\n", wantErr: `line 1: monitors.lease is "-1s", want a duration`},
		{name: "monitors typo", yaml: "monitors: {worker: 2}\n", wantErr: `unknown key "monitors.worker"`},
		{name: "syntax error", yaml: "listen: [\n", wantErr: "yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c fileConfig
			err := decodeConfig([]byte(tt.yaml), &c)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, &c)
		})
	}
}

// TestFullConfigFile: a file with every key of the configuration (the
// documented defaults) loads, and the keys this build does not use are
// the ones reported (issue 11 item 12).
func TestFullConfigFile(t *testing.T) {
	c, err := loadConfig(filepath.Join("testdata", "config", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || c.Auth.AdminUsername != "admin" || len(c.Gateway.Upstreams) != 3 ||
		c.Gateway.Upstreams[2].Headers["X-Team"] != "agents" || c.Gateway.MaxRequestBytes != 32<<20 ||
		time.Duration(c.Gateway.Stream.CheckMaxDelay) != 50*time.Millisecond || c.Gateway.MCP.RugPullAction.Value != "block" {
		t.Errorf("decoded %+v", c)
	}
	want := "ledger.close_idle_after"
	got := c.notInEffect()
	slices.Sort(got)
	w := strings.Split(want, ",")
	slices.Sort(w)
	if !slices.Equal(got, w) {
		t.Errorf("notInEffect = %v, want %v", got, w)
	}
}

func TestLoadConfigLocations(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	os.MkdirAll(filepath.Join(home, ".vigil"), 0o755)
	t.Setenv("HOME", home)
	t.Setenv("VIGIL_CONFIG", "")
	t.Chdir(dir)

	c, err := loadConfig("")
	if err != nil || c.path != "" {
		t.Fatalf("no file anywhere: %+v, %v", c, err)
	}
	os.WriteFile(filepath.Join(home, ".vigil", "config.yaml"), []byte("listen: home\n"), 0o644)
	if c, err := loadConfig(""); err != nil || c.Listen != "home" {
		t.Fatalf("~/.vigil/config.yaml: %+v, %v", c, err)
	}
	os.WriteFile("vigil.yaml", []byte("listen: cwd\n"), 0o644)
	if c, err := loadConfig(""); err != nil || c.Listen != "cwd" {
		t.Fatalf("./vigil.yaml wins over the home file: %+v, %v", c, err)
	}
	env := filepath.Join(dir, "env.yaml")
	os.WriteFile(env, []byte("listen: env\n"), 0o644)
	t.Setenv("VIGIL_CONFIG", env)
	if c, err := loadConfig(""); err != nil || c.Listen != "env" || c.path != env {
		t.Fatalf("VIGIL_CONFIG: %+v, %v", c, err)
	}
	if _, err := loadConfig(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("a missing --config file must be an error naming it, got %v", err)
	}
	os.WriteFile("bad.yaml", []byte("lisen: x\n"), 0o644)
	if _, err := loadConfig("bad.yaml"); err == nil || !strings.Contains(err.Error(), "config bad.yaml: line 1") {
		t.Fatalf("error must name file and line, got %v", err)
	}
}

// FuzzDecodeConfig: any input either decodes or gives an error; never a panic.
func FuzzDecodeConfig(f *testing.F) {
	for _, s := range []string{"", "listen: x\n", "detectors: {timeout: 2s}\n", "- a\n", "a: [\n", "gateway:\n  upstreams: [{name: x}]\n", "ledger: 5\n", "? [a]\n: b\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var c fileConfig
		// A value of the wrong type is reported with its key by
		// checkValue, never by the decoder's "cannot unmarshal".
		if err := decodeConfig([]byte(s), &c); err != nil && strings.Contains(err.Error(), "cannot unmarshal") {
			t.Errorf("type error without the key's name: %v", err)
		}
	})
}

// TestConfigFileFeedsCommands: the file's values reach vigil check (the
// detector provider) and flags/environment still win over it.
func TestConfigFileFeedsCommands(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "mod.gr")
	tr := filepath.Join(dir, "t.json")
	os.WriteFile(pol, []byte("from invariant.detectors import moderated\n\nraise \"harmful\" if:\n    (m: Message)\n    moderated(m.content)\n"), 0o644)
	os.WriteFile(tr, []byte(`[{"role": "user", "content": "hello"}]`), 0o644)
	t.Setenv("VIGIL_DETECTORS_BASE_URL", "")
	t.Setenv("VIGIL_CONFIG", "")

	// A provider configured only in the file: the policy loads, and the
	// unreachable endpoint becomes a detector_error rule failure (exit 3).
	cfg := filepath.Join(dir, "vigil.yaml")
	os.WriteFile(cfg, []byte("detectors:\n  base_url: http://127.0.0.1:1/v1\n  timeout: 200ms\n"), 0o644)
	code, out, errOut := runVigil(t, "", "check", "--config", cfg, "--policy", pol, "--trace", tr)
	if code != 3 || !strings.Contains(out, "detector_error") {
		t.Fatalf("with detectors.base_url in the file: exit %d, stdout %q, stderr %q; want 3 with a detector_error", code, out, errOut)
	}
	// The flag wins over the file: an empty base URL means no provider.
	code, _, errOut = runVigil(t, "", "check", "--config="+cfg, "--detectors-base-url", "", "--policy", pol, "--trace", tr)
	if code != 2 || !strings.Contains(errOut, "detectors.base_url") {
		t.Fatalf("flag must override the file: exit %d, stderr %q", code, errOut)
	}
	// A bad file is a clear error naming it.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("detectors:\n  base_url: x\nlistn: y\n"), 0o644)
	code, _, errOut = runVigil(t, "", "check", "--config", bad, "--policy", pol, "--trace", tr)
	if code != 2 || !strings.Contains(errOut, "bad.yaml: line 3: unknown key \"listn\" (did you mean \"listen\"?)") {
		t.Fatalf("bad config: exit %d, stderr %q", code, errOut)
	}
	detect.Configure(detect.Config{})
}

// TestServeReadsConfigFile: vigil serve takes data_dir and log.format from
// the file; --listen on the command line still applies.
func TestServeReadsConfigFile(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "vigil.yaml")
	os.WriteFile(cfg, []byte("data_dir: "+data+"\nlog: {format: json}\nlisten: 127.0.0.1:1\n"), 0o644)
	t.Setenv("VIGIL_API_KEY", "config-test-key-0123456789")
	t.Setenv("VIGIL_LEDGER_KEY", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"}, strings.NewReader(""), io.Discard, &stderr)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), "listening on") {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", stderr.String())
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d:\n%s", code, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, err := os.Stat(filepath.Join(data, "ledger.key")); err != nil {
		t.Errorf("data_dir from the file not used: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "127.0.0.1:1 ") || strings.Contains(stderr.String(), "127.0.0.1:1)") {
		t.Errorf("--listen must win over the file:\n%s", stderr.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exit %d after cancel:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop after its context was cancelled")
	}
	if !strings.Contains(stderr.String(), `"msg":"shutting down"`) {
		t.Errorf("log.format json from the file not used:\n%s", stderr.String())
	}
}
