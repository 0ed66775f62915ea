package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
gateway:            # accepted, not read yet
  enabled: true
  upstreams: []
`, check: func(t *testing.T, c *fileConfig) {
			if c.Listen != "127.0.0.1:9999" || c.DataDir != "/srv/vigil" || c.DB != "postgres://db/vigil" ||
				c.Log.Format != "json" || c.Ledger.KeyFile != "/etc/vigil/ledger.key" ||
				c.Detectors.BaseURL != "http://127.0.0.1:7000/v1" || c.Detectors.APIKey != "sk-test" ||
				time.Duration(c.Detectors.Timeout) != 3*time.Second {
				t.Errorf("decoded %+v", c)
			}
		}},
		{name: "typo with suggestion", yaml: "listen: x\ndetector:\n  base_url: y\n", wantErr: `line 2: unknown key "detector" (did you mean "detectors"?)`},
		{name: "unknown without suggestion", yaml: "wibble: 1\n", wantErr: `unknown key "wibble"`},
		{name: "bad duration", yaml: "detectors:\n  timeout: soon\n", wantErr: `line 2: "soon" is not a duration`},
		{name: "not a mapping", yaml: "- a\n- b\n", wantErr: "line 1: the configuration must be a mapping"},
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
		_ = decodeConfig([]byte(s), &c)
	})
}
