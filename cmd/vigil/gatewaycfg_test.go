package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGatewayPrecedence: flags > VIGIL_GATEWAY_* > file > defaults, for
// each kind of value, with errors naming the key and where the value
// came from.
func TestGatewayPrecedence(t *testing.T) {
	file := "gateway:\n  fail_mode: open\n  stream: {holdback_chars: 100, mode: buffer}\n  session_stitching: header\n  eval_timeout: 3s\n"
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		check func(t *testing.T, v map[string]string)
		err   string
	}{
		{name: "file over defaults", check: func(t *testing.T, v map[string]string) {
			want := map[string]string{"fail_mode": "open", "stream.holdback_chars": "100", "stream.mode": "buffer", "session_stitching": "header",
				"eval_timeout": "3s", "header_guardrails": "merge", "stream.check_interval_chars": "64"}
			for k, w := range want {
				if v[k] != w {
					t.Errorf("%s = %q, want %q", k, v[k], w)
				}
			}
		}},
		{name: "env over file", env: map[string]string{"VIGIL_GATEWAY_FAIL_MODE": "closed", "VIGIL_GATEWAY_STREAM_HOLDBACK_CHARS": "32"},
			check: func(t *testing.T, v map[string]string) {
				if v["fail_mode"] != "closed" || v["stream.holdback_chars"] != "32" || v["stream.mode"] != "buffer" {
					t.Errorf("%v", v)
				}
			}},
		{name: "flag over env", env: map[string]string{"VIGIL_GATEWAY_STREAM_MODE": "passthrough"}, args: []string{"--stream-mode", "incremental", "--holdback-chars", "8"},
			check: func(t *testing.T, v map[string]string) {
				if v["stream.mode"] != "incremental" || v["stream.holdback_chars"] != "8" {
					t.Errorf("%v", v)
				}
			}},
		{name: "compat GUARDRAILS_FILE_PATH", env: map[string]string{"GUARDRAILS_FILE_PATH": "/x.gr"}, check: func(t *testing.T, v map[string]string) {
			if v["guardrails_file"] != "/x.gr" {
				t.Errorf("%v", v["guardrails_file"])
			}
		}},
		{name: "bad env enum", env: map[string]string{"VIGIL_GATEWAY_FAIL_MODE": "maybe"}, err: `gateway.fail_mode: "maybe" (from VIGIL_GATEWAY_FAIL_MODE) is not one of closed, open`},
		{name: "bad flag enum", args: []string{"--stream-mode", "fast"}, err: `gateway.stream.mode: "fast" (from --stream-mode)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range gwKeys {
				t.Setenv(gwEnv(k.key), "")
			}
			t.Setenv("GUARDRAILS_FILE_PATH", "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var fc fileConfig
			if err := decodeConfig([]byte(file), &fc); err != nil {
				t.Fatal(err)
			}
			fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			flags := addGatewayFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			v, err := gatewayValues(&fc, fs, flags)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, v)
		})
	}
}

func TestGatewayOptions(t *testing.T) {
	dir := t.TempDir()
	rule := filepath.Join(dir, "rules.gr")
	os.WriteFile(rule, []byte("raise \"x\" if:\n    (msg: Message)\n    \"x\" in msg.content\n"), 0o600)
	t.Setenv("MY_AZURE_KEY", "az-secret")
	yaml := "gateway:\n  guardrails_file: " + rule + "\n  global_guardrails:\n    - {name: log-it, content: \"raise \\\"y\\\" if:\\n    (msg: Message)\\n    \\\"y\\\" in msg.content\\n\", action: log}\n" +
		"  upstreams:\n    - {name: azure, type: azure-openai, base_url: \"https://r.openai.azure.com/openai/deployments/d\", api_version: \"2024-10-21\", auth: inject, api_key_env: MY_AZURE_KEY, timeout: 5s}\n"
	var fc fileConfig
	if err := decodeConfig([]byte(yaml), &fc); err != nil {
		t.Fatal(err)
	}
	for _, k := range gwKeys {
		t.Setenv(gwEnv(k.key), "")
	}
	v, err := gatewayValues(&fc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	o, _, err := gatewayOptions(&fc, v, policyCompiler{})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Global) != 2 || o.Global[0].ID != "guardrails-from-gateway-config-file" || o.Global[1].Action != "log" {
		t.Fatalf("global %+v", o.Global)
	}
	if len(o.Upstreams) != 1 || o.Upstreams[0].APIKey != "az-secret" || o.Upstreams[0].Timeout != 5*time.Second {
		t.Fatalf("upstreams %+v", o.Upstreams)
	}
	// An invalid global rule stops the start, naming the key.
	bad := "gateway:\n  global_guardrails:\n    - {content: \"raise if if\"}\n"
	fc = fileConfig{}
	if err := decodeConfig([]byte(bad), &fc); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gatewayOptions(&fc, v, policyCompiler{}); err == nil || !strings.Contains(err.Error(), "gateway.global_guardrails[0]") {
		t.Fatalf("err %v", err)
	}
}

// TestGatewayGlobalFiles: the global rules' files are the ones watched
// for live reload, and a file that stops compiling is named in the error
// the reload logs.
func TestGatewayGlobalFiles(t *testing.T) {
	dir := t.TempDir()
	compat := filepath.Join(dir, "compat.gr")
	listed := filepath.Join(dir, "listed.gr")
	rule := "raise \"x\" if:\n    (msg: Message)\n    \"x\" in msg.content\n"
	for _, f := range []string{compat, listed} {
		if err := os.WriteFile(f, []byte(rule), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := "gateway:\n  global_guardrails:\n    - name: inline\n      content: |\n        raise \"y\" if:\n            (msg: Message)\n            \"y\" in msg.content\n    - {name: listed, file: " + listed + ", severity: critical}\n"
	var fc fileConfig
	if err := decodeConfig([]byte(file), &fc); err != nil {
		t.Fatal(err)
	}
	vals := map[string]string{"guardrails_file": compat}
	gs, files, err := globalGuardrails(&fc, vals, policyCompiler{})
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 3 || gs[2].Severity != "critical" || gs[2].Name != "listed" {
		t.Errorf("guardrails %+v", gs)
	}
	if strings.Join(files, " ") != compat+" "+listed {
		t.Errorf("files %v", files)
	}
	if err := os.WriteFile(listed, []byte("raise \"x\" if:\n    (msg: Message\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := globalGuardrails(&fc, vals, policyCompiler{}); err == nil || !strings.Contains(err.Error(), "gateway.global_guardrails[1]: "+listed) {
		t.Errorf("err %v", err)
	}
}

// TestGatewayMaxSessions: gateway.max_sessions reaches the gateway, from
// the file or the environment, with 0 meaning no cap.
func TestGatewayMaxSessions(t *testing.T) {
	for _, tt := range []struct {
		name, yaml, env string
		want            int
	}{
		{"default", "gateway: {}\n", "", 50000},
		{"file", "gateway: {max_sessions: 1000}\n", "", 1000},
		{"environment over file", "gateway: {max_sessions: 1000}\n", "200", 200},
		{"zero is no cap", "gateway: {max_sessions: 0}\n", "", -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var fc fileConfig
			if err := decodeConfig([]byte(tt.yaml), &fc); err != nil {
				t.Fatal(err)
			}
			for _, k := range gwKeys {
				t.Setenv(gwEnv(k.key), "")
			}
			t.Setenv("VIGIL_GATEWAY_MAX_SESSIONS", tt.env)
			v, err := gatewayValues(&fc, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			o, _, err := gatewayOptions(&fc, v, policyCompiler{})
			if err != nil {
				t.Fatal(err)
			}
			if o.MaxSessions != tt.want {
				t.Errorf("MaxSessions = %d, want %d", o.MaxSessions, tt.want)
			}
		})
	}
}
