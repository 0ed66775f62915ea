package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/policy"
)

// The gateway section of the configuration (docs/configuration.md,
// gateway.*): each scalar key is read from its flag (vigil gateway), else
// VIGIL_GATEWAY_<KEY>, else the file, else its default. Lists
// (upstreams, global_guardrails) come from the file only.

// gwKey is one scalar gateway setting.
type gwKey struct {
	key  string // dotted path under gateway
	env  string // its environment variable
	flag string // flag of vigil gateway, "" when none
	def  string
	enum []string
	help string
}

var gwKeys = []gwKey{
	{key: "enabled", env: "VIGIL_GATEWAY_ENABLED", def: "true", enum: []string{"true", "false"}, help: "serve /api/v1/gateway/ inside vigil serve"},
	{key: "require_key", env: "VIGIL_GATEWAY_REQUIRE_KEY", flag: "require-key", def: "false", enum: []string{"true", "false"}, help: "require a Vigil key on every call"},
	{key: "default_dataset", env: "VIGIL_GATEWAY_DEFAULT_DATASET", flag: "default-dataset", help: "dataset recording calls whose path names none"},
	{key: "guardrails_file", env: "VIGIL_GATEWAY_GUARDRAILS_FILE", flag: "guardrails-file", help: "a rule file applied to every call as one blocking guardrail (GUARDRAILS_FILE_PATH)"},
	{key: "header_guardrails", env: "VIGIL_GATEWAY_HEADER_GUARDRAILS", def: "merge", enum: []string{"merge", "replace", "ignore"}, help: "Invariant-Guardrails header: merge, replace or ignore"},
	{key: "input_check", env: "VIGIL_GATEWAY_INPUT_CHECK", def: "concurrent", enum: []string{"concurrent", "before"}, help: "input check concurrent with the upstream call, or before it"},
	{key: "eval_timeout", env: "VIGIL_GATEWAY_EVAL_TIMEOUT", def: "2s", help: "longest evaluation"},
	{key: "fail_mode", env: "VIGIL_GATEWAY_FAIL_MODE", flag: "fail-mode", def: "closed", enum: []string{"closed", "open"}, help: "evaluation failures block (closed) or pass (open)"},
	{key: "expose_rule_content", env: "VIGIL_GATEWAY_EXPOSE_RULE_CONTENT", def: "true", enum: []string{"true", "false"}, help: "rule text in guardrail errors"},
	{key: "openai_error_format", env: "VIGIL_GATEWAY_OPENAI_ERROR_FORMAT", def: "invariant", enum: []string{"invariant", "native"}, help: "OpenAI guardrail error body"},
	{key: "openai.force_stream_usage", env: "VIGIL_GATEWAY_OPENAI_FORCE_STREAM_USAGE", def: "false", enum: []string{"true", "false"}},
	{key: "stream.mode", env: "VIGIL_GATEWAY_STREAM_MODE", flag: "stream-mode", def: "incremental", enum: []string{"incremental", "buffer", "passthrough"}, help: "streaming guard: incremental, buffer or passthrough"},
	{key: "stream.holdback_chars", env: "VIGIL_GATEWAY_STREAM_HOLDBACK_CHARS", flag: "holdback-chars", def: "256", help: "characters held back beyond the last passing check"},
	{key: "stream.check_interval_chars", env: "VIGIL_GATEWAY_STREAM_CHECK_INTERVAL_CHARS", def: "64"},
	{key: "stream.check_max_delay", env: "VIGIL_GATEWAY_STREAM_CHECK_MAX_DELAY", def: "50ms"},
	{key: "stream.keepalive", env: "VIGIL_GATEWAY_STREAM_KEEPALIVE", def: "15s"},
	{key: "stream.overhead_comment", env: "VIGIL_GATEWAY_STREAM_OVERHEAD_COMMENT", def: "false", enum: []string{"true", "false"}},
	{key: "session_stitching", env: "VIGIL_GATEWAY_SESSION_STITCHING", def: "auto", enum: []string{"auto", "header", "off"}, help: "session stitching: auto, header or off"},
	{key: "session_idle_timeout", env: "VIGIL_GATEWAY_SESSION_IDLE_TIMEOUT", def: "30m"},
	{key: "max_sessions", env: "VIGIL_GATEWAY_MAX_SESSIONS", def: "50000", help: "most open stitched sessions (0: no cap); past it the least recently active end early"},
	{key: "session_guardrail_scope", env: "VIGIL_GATEWAY_SESSION_GUARDRAIL_SCOPE", def: "request", enum: []string{"request", "session"}},
	{key: "record.queue_size", env: "VIGIL_GATEWAY_RECORD_QUEUE_SIZE", def: "10000"},
	{key: "record.on_full", env: "VIGIL_GATEWAY_RECORD_ON_FULL", def: "drop", enum: []string{"drop", "block"}},
	{key: "max_request_bytes", env: "VIGIL_GATEWAY_MAX_REQUEST_BYTES", def: "32MiB"},
}

// gwEnv is the environment variable of a gateway key.
func gwEnv(key string) string {
	for _, k := range gwKeys {
		if k.key == key {
			return k.env
		}
	}
	return ""
}

// gwFileValue is the file's value of key as text, "" when unset.
func gwFileValue(fc *fileConfig, key string) string {
	g := &fc.Gateway
	set := func(k string) bool { return slices.Contains(fc.keys, "gateway."+k) }
	if !set(key) {
		return ""
	}
	b := strconv.FormatBool
	d := func(x duration) string { return time.Duration(x).String() }
	switch key {
	case "enabled":
		if g.Enabled != nil {
			return b(*g.Enabled)
		}
	case "require_key":
		return b(g.RequireKey)
	case "default_dataset":
		return g.DefaultDataset
	case "guardrails_file":
		return g.GuardrailsFile
	case "header_guardrails":
		return g.HeaderGuardrails.Value
	case "input_check":
		return g.InputCheck.Value
	case "eval_timeout":
		return d(g.EvalTimeout)
	case "fail_mode":
		return g.FailMode.Value
	case "expose_rule_content":
		if g.ExposeRuleContent != nil {
			return b(*g.ExposeRuleContent)
		}
	case "openai_error_format":
		return g.OpenAIErrorFormat.Value
	case "openai.force_stream_usage":
		return b(g.OpenAI.ForceStreamUsage)
	case "stream.mode":
		return g.Stream.Mode.Value
	case "stream.holdback_chars":
		return strconv.Itoa(g.Stream.HoldbackChars)
	case "stream.check_interval_chars":
		return strconv.Itoa(g.Stream.CheckIntervalChars)
	case "stream.check_max_delay":
		return d(g.Stream.CheckMaxDelay)
	case "stream.keepalive":
		return d(g.Stream.Keepalive)
	case "stream.overhead_comment":
		return b(g.Stream.OverheadComment)
	case "session_stitching":
		return g.SessionStitching.Value
	case "session_idle_timeout":
		return d(g.SessionIdleTimeout)
	case "max_sessions":
		return strconv.Itoa(g.MaxSessions)
	case "session_guardrail_scope":
		return g.SessionGuardrailScope.Value
	case "record.queue_size":
		return strconv.Itoa(g.Record.QueueSize)
	case "record.on_full":
		return g.Record.OnFull.Value
	case "max_request_bytes":
		return strconv.FormatInt(int64(g.MaxRequestBytes), 10)
	}
	return ""
}

// gwFlags are the gateway flags registered on a FlagSet.
type gwFlags map[string]*string

// addGatewayFlags registers the flags of the keys that have one.
func addGatewayFlags(fs *flag.FlagSet) gwFlags {
	out := gwFlags{}
	for _, k := range gwKeys {
		if k.flag != "" {
			out[k.key] = fs.String(k.flag, "", fmt.Sprintf("%s (env %s; config gateway.%s; default %q)", k.help, gwEnv(k.key), k.key, k.def))
		}
	}
	return out
}

// gatewayValues resolves every scalar key: flag > environment > file >
// default. A value outside its enumeration is an error naming the key
// and where the value came from.
func gatewayValues(fc *fileConfig, fs *flag.FlagSet, flags gwFlags) (map[string]string, error) {
	setFlags := map[string]bool{}
	if fs != nil {
		fs.Visit(func(f *flag.Flag) { setFlags[f.Name] = true })
	}
	out := map[string]string{}
	for _, k := range gwKeys {
		v, src := k.def, "default"
		if fv := gwFileValue(fc, k.key); fv != "" {
			v, src = fv, "config gateway."+k.key
		}
		env := gwEnv(k.key)
		if ev := os.Getenv(env); ev != "" {
			v, src = ev, env
		} else if k.key == "guardrails_file" && os.Getenv("GUARDRAILS_FILE_PATH") != "" {
			v, src = os.Getenv("GUARDRAILS_FILE_PATH"), "GUARDRAILS_FILE_PATH"
		}
		if p := flags[k.key]; p != nil && setFlags[k.flag] {
			v, src = *p, "--"+k.flag
		}
		if k.enum != nil && !slices.Contains(k.enum, v) {
			return nil, fmt.Errorf("gateway.%s: %q (from %s) is not one of %s", k.key, v, src, strings.Join(k.enum, ", "))
		}
		out[k.key] = v
	}
	return out, nil
}

// gatewayOptions builds the gateway's options from the resolved values
// and the file's lists; comp compiles the global rules, which must all
// load.
func gatewayOptions(fc *fileConfig, vals map[string]string, comp gateway.Compiler) (gateway.Options, gateway.RecordOptions, error) {
	var o gateway.Options
	var ro gateway.RecordOptions
	var err error
	errAt := func(key string, e error) error { return fmt.Errorf("gateway.%s: %w", key, e) }
	dur := func(key string) time.Duration {
		if err != nil {
			return 0
		}
		d, e := time.ParseDuration(vals[key])
		if e != nil || d < 0 {
			err = errAt(key, fmt.Errorf("%q is not a duration such as 2s", vals[key]))
		}
		return d
	}
	integer := func(key string) int {
		if err != nil {
			return 0
		}
		n, e := strconv.Atoi(vals[key])
		if e != nil || n < 0 {
			err = errAt(key, fmt.Errorf("%q is not a number of 0 or more", vals[key]))
		}
		return n
	}
	o.RequireKey = vals["require_key"] == "true"
	o.DefaultDataset = vals["default_dataset"]
	o.HeaderGuardrails = vals["header_guardrails"]
	o.InputCheck = vals["input_check"]
	o.EvalTimeout = dur("eval_timeout")
	o.FailOpen = vals["fail_mode"] == "open"
	o.HideRuleContent = vals["expose_rule_content"] == "false"
	o.OpenAIErrorNative = vals["openai_error_format"] == "native"
	o.ForceStreamUsage = vals["openai.force_stream_usage"] == "true"
	o.Stream = gateway.StreamOptions{Mode: vals["stream.mode"], HoldbackChars: integer("stream.holdback_chars"),
		CheckInterval: integer("stream.check_interval_chars"), CheckMaxDelay: dur("stream.check_max_delay"),
		Keepalive: dur("stream.keepalive"), OverheadComment: vals["stream.overhead_comment"] == "true"}
	o.SessionStitching = vals["session_stitching"]
	o.SessionIdle = dur("session_idle_timeout")
	if o.MaxSessions = integer("max_sessions"); o.MaxSessions == 0 {
		o.MaxSessions = -1 // the file's 0 is "no cap"; the gateway's 0 is its default
	}
	o.SessionScope = vals["session_guardrail_scope"]
	ro.QueueSize = integer("record.queue_size")
	ro.Block = vals["record.on_full"] == "block"
	if err != nil {
		return o, ro, err
	}
	if o.MaxRequestBytes, err = parseSize(vals["max_request_bytes"]); err != nil {
		return o, ro, errAt("max_request_bytes", err)
	}
	for i, u := range fc.Gateway.Upstreams {
		up := gateway.Upstream{Name: u.Name, Type: u.Type.Value, BaseURL: u.BaseURL, APIVersion: u.APIVersion, Auth: u.Auth.Value,
			Headers: u.Headers, Timeout: time.Duration(u.Timeout), StreamIdleTimeout: time.Duration(u.StreamIdleTimeout)}
		if u.APIKeyEnv != "" {
			up.APIKey = os.Getenv(u.APIKeyEnv)
			if up.APIKey == "" && up.Auth == gateway.AuthInject {
				return o, ro, fmt.Errorf("gateway.upstreams[%d] (%s): auth inject, but $%s is empty", i, u.Name, u.APIKeyEnv)
			}
		}
		o.Upstreams = append(o.Upstreams, up)
	}
	// Global guardrails (spec §5): validated at start; an invalid one
	// stops the process.
	if o.Global, _, err = globalGuardrails(fc, vals, comp); err != nil {
		return o, ro, err
	}
	return o, ro, nil
}

// policyCompiler compiles rules without a server's cache (standalone).
type policyCompiler struct{}

func (policyCompiler) Load(src string) (*policy.Policy, error) {
	return policy.Load(src, policy.Options{})
}

// spoolDir is the standalone gateway's spool directory.
func spoolDir(dataDir string) string { return filepath.Join(dataDir, "spool") }

// globalGuardrails compiles the global guardrails (gateway.guardrails_file
// and gateway.global_guardrails) and returns them with the files they
// were read from, which reload live.
func globalGuardrails(fc *fileConfig, vals map[string]string, comp gateway.Compiler) ([]*gateway.Guardrail, []string, error) {
	var out []*gateway.Guardrail
	var files []string
	errAt := func(key string, e error) error { return fmt.Errorf("gateway.%s: %w", key, e) }
	if f := vals["guardrails_file"]; f != "" {
		files = append(files, f)
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, errAt("guardrails_file", err)
		}
		p, err := comp.Load(string(src))
		if err != nil {
			return nil, nil, errAt("guardrails_file", fmt.Errorf("%s: %w", f, err))
		}
		out = append(out, &gateway.Guardrail{ID: gateway.FileRuleID, Name: gateway.FileRuleName, Content: string(src), Action: "block", Policy: p})
	}
	for i, r := range fc.Gateway.GlobalGuardrails {
		key := fmt.Sprintf("global_guardrails[%d]", i)
		src := r.Content
		if r.File != "" {
			files = append(files, r.File)
			b, err := os.ReadFile(r.File)
			if err != nil {
				return nil, nil, errAt(key, err)
			}
			src = string(b)
		}
		if src == "" {
			return nil, nil, errAt(key, fmt.Errorf("content or file is required"))
		}
		p, err := comp.Load(src)
		if err != nil {
			if r.File != "" {
				err = fmt.Errorf("%s: %w", r.File, err)
			}
			return nil, nil, errAt(key, err)
		}
		action := r.Action.Value
		if action == "" {
			action = "block"
		}
		name := r.Name
		if name == "" {
			name = "global guardrail " + strconv.Itoa(i)
		}
		out = append(out, &gateway.Guardrail{ID: "global-" + strconv.Itoa(i), Name: name, Content: src, Action: action, Severity: r.Severity, Policy: p})
	}
	return out, files, nil
}

// globalReloadInterval is how often global rule files are checked.
const globalReloadInterval = 2 * time.Second

// watchGlobal reloads gw's global guardrails when their files change or
// the process gets SIGHUP, until the returned func is called.
func watchGlobal(gw *gateway.Gateway, fc *fileConfig, vals map[string]string, comp gateway.Compiler) func() {
	_, files, err := globalGuardrails(fc, vals, comp)
	if err != nil {
		files = nil
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(context.Background())
	gw.WatchGlobal(ctx, files, globalReloadInterval, hup, func() ([]*gateway.Guardrail, error) {
		gs, _, err := globalGuardrails(fc, vals, comp)
		return gs, err
	})
	return func() {
		signal.Stop(hup)
		cancel()
	}
}
