package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/mcp"
	"github.com/vigilhq/vigil/server"
)

// vigil mcp run: the MCP stdio wrapper (spec/gateway.md §9.3); vigil mcp
// pins list|approve|forget: the tool pins the server keeps (§9.4).

func init() {
	register(command{name: "mcp", summary: "wrap an MCP server (run) or manage its tool pins (pins list|approve|forget)", run: runMCP})
}

const mcpUsage = `Usage: vigil mcp run [flags] -- <command> [args...]
       vigil mcp pins list [--server-name NAME] [--url URL] [--api-key KEY] [--json]
       vigil mcp pins approve <server> <tool> | <pin id>
       vigil mcp pins forget <server> <tool> | <pin id>

'run' starts an MCP server over stdio and sits between it and the client: tools/call
arguments and results are checked against the guardrails, tool definitions are pinned on
the server (a changed definition is blocked until approved), and with --dataset the
session is recorded as a trace. 'pins' lists, approves and forgets the pinned definitions.
Run 'vigil mcp run -h' or 'vigil mcp pins -h' for the flags.
`

func runMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, mcpUsage)
		return exitCode(2, "")
	}
	switch args[0] {
	case "run":
		return runMCPRun(ctx, args[1:], stdin, stdout, stderr)
	case "pins":
		return runMCPPins(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stderr, mcpUsage)
		return nil
	}
	fmt.Fprint(stderr, mcpUsage)
	return exitCode(2, fmt.Sprintf("mcp: unknown subcommand %q (want run or pins)", args[0]))
}

// splitMCPArgs separates the wrapper's arguments from the server command
// (after "--" or "--exec") and takes out the --metadata-<k>=<v> flags.
func splitMCPArgs(args []string) (own []string, command []string, meta map[string]any, err error) {
	meta = map[string]any{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "--exec" || a == "-exec" {
			return own, args[i+1:], meta, nil
		}
		if k, ok := strings.CutPrefix(strings.TrimPrefix(a, "-"), "-metadata-"); ok {
			key, val, found := strings.Cut(k, "=")
			if !found {
				if i+1 >= len(args) {
					return nil, nil, nil, fmt.Errorf("mcp run: %s needs a value (--metadata-<key>=<value>)", a)
				}
				i++
				val = args[i]
			}
			if key == "" {
				return nil, nil, nil, fmt.Errorf("mcp run: %s: empty metadata key", a)
			}
			meta[key] = val
			continue
		}
		own = append(own, a)
	}
	return own, nil, meta, nil
}

func runMCPRun(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	own, command, meta, err := splitMCPArgs(args)
	if err != nil {
		return exitCode(2, err.Error())
	}
	fs := newFlagSet("mcp run", "mcp run [--dataset NAME] [--url URL] [--api-key KEY] [--server-name NAME] [--session KEY] [--no-push]\n"+
		"          [--guardrails-file PATH] [--fail-mode open|closed] [--failure-response-format error|content]\n"+
		"          [--rug-pull-action block|log] [--metadata-<k>=<v> ...] [--log-file PATH] [--verbose]\n"+
		"          [--cache-dir DIR] [--spool-dir DIR] ( -- | --exec ) <command> [args...]",
		"Start an MCP server over stdio and relay its newline-delimited JSON-RPC, checking\n"+
			"tools/call arguments and results against the guardrails (--guardrails-file, plus the\n"+
			"dataset's guardrails with --dataset), pinning tool definitions on the Vigil server\n"+
			"(when a key is set) and, with --dataset, recording the session as a trace. The server's\n"+
			"stderr passes through; the wrapper exits with the server's exit status.", stderr)
	var sf serverFlags
	sf.register(fs)
	dataset := fs.String("dataset", "", "record the session into dataset `NAME` and apply its guardrails")
	fs.StringVar(dataset, "project-name", "", "alias of --dataset")
	serverName := fs.String("server-name", "", "pinning identity of the server (default its serverInfo.name, else the command's basename)")
	session := fs.String("session", os.Getenv("VIGIL_SESSION"), "agent session `KEY` (the Invariant-Session the agent sends the gateway): record into the open trace of that session, such as the one its LLM calls went to (env VIGIL_SESSION)")
	noPush := fs.Bool("no-push", false, "do not record the session")
	fs.Bool("push-explorer", false, "accepted for compatibility; recording is on whenever --dataset is given")
	guardFile := fs.String("guardrails-file", "", "a policy `FILE` applied as one blocking guardrail")
	failMode := fs.String("fail-mode", "closed", "when guardrails cannot be evaluated: closed (block) or open (pass)")
	failFormat := fs.String("failure-response-format", "error", "a blocked call's answer: error (JSON-RPC error) or content (an isError tool result)")
	rugPull := fs.String("rug-pull-action", "block", "a tool whose definition changed since approval: block (replace it by a stub) or log")
	logFile := fs.String("log-file", "", "log `FILE` (default ~/.vigil/logs/mcp.log)")
	cacheDir := fs.String("cache-dir", "", "`DIR` keeping the last rules and approved pins, used while the server is unreachable (default ~/.vigil/cache)")
	spoolDir := fs.String("spool-dir", "", "`DIR` keeping the records the server could not take; they are written at the next start (default ~/.vigil/spool)")
	verbose := fs.Bool("verbose", false, "log to stderr too")
	if _, err := parseFlags(fs, own); err != nil {
		return err
	}
	if len(command) == 0 {
		fs.Usage()
		return exitCode(2, "mcp run: no server command (give it after --)")
	}
	if *failMode != "closed" && *failMode != "open" {
		return exitCode(2, fmt.Sprintf("mcp run: --fail-mode %q: want open or closed", *failMode))
	}
	if *failFormat != "error" && *failFormat != "content" {
		return exitCode(2, fmt.Sprintf("mcp run: --failure-response-format %q: want error or content", *failFormat))
	}
	if *rugPull != "block" && *rugPull != "log" {
		return exitCode(2, fmt.Sprintf("mcp run: --rug-pull-action %q: want block or log", *rugPull))
	}
	if *session != "" && !printableASCII(*session, 128) {
		return exitCode(2, "mcp run: --session must be 1 to 128 printable ASCII characters")
	}
	if *cacheDir == "" {
		*cacheDir = defaultMCPDir("cache")
	}
	if *spoolDir == "" {
		*spoolDir = defaultMCPDir("spool")
	}
	log, closeLog := mcpLogger(*logFile, *verbose, stderr)
	defer closeLog()

	guard := &mcp.Guard{FailOpen: *failMode == "open"}
	if *guardFile != "" {
		src, err := os.ReadFile(*guardFile)
		if err != nil {
			return exitCode(2, fmt.Sprintf("mcp run: --guardrails-file: %v", err))
		}
		r, err := mcp.LoadRule("guardrails-from-gateway-config-file", "guardrails from gateway configuration file", string(src), "block")
		if err != nil {
			return exitCode(2, fmt.Sprintf("mcp run: --guardrails-file %s: %v", *guardFile, err))
		}
		guard.Rules = append(guard.Rules, r)
	}
	opt := mcp.Options{ServerName: *serverName, Transport: "stdio", Guard: guard, RugPullAction: *rugPull,
		FailureFormat: *failFormat, Metadata: meta, SystemUser: systemUser(), Logger: log}
	if *session != "" {
		opt.SessionKey = "h:" + *session
	}
	c, err := sf.client()
	if err != nil {
		return exitCode(2, "mcp run: "+err.Error())
	}
	if sf.key != "" || client.EnvKey() != "" {
		cs := mcp.ClientStore{C: c, CacheDir: *cacheDir, SpoolDir: *spoolDir}
		opt.Store = cs
		go func() {
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if n, err := cs.ReplaySpool(rctx); err != nil {
				log.Warn("mcp: spooled records not written yet", "written", n, "err", err)
			} else if n > 0 {
				log.Info("mcp: spooled sessions written", "sessions", n)
			}
		}()
		if *dataset != "" && !*noPush {
			opt.Dataset = *dataset
		}
		if *dataset != "" {
			fileRules := guard.Rules
			rules, err := fetchMCPRules(ctx, c, *dataset, *cacheDir)
			if err != nil {
				log.Warn("mcp: dataset guardrails unavailable", "dataset", *dataset, "err", err)
				guard.Unavailable = "guardrails unavailable"
			}
			guard.Rules = append(append([]*mcp.Rule(nil), fileRules...), rules...)
			fctx, stop := context.WithCancel(ctx)
			defer stop()
			go followMCPRules(fctx, c, *dataset, *cacheDir, fileRules, guard, log)
		}
	} else if *dataset != "" {
		return exitCode(2, "mcp run: --dataset needs an API key (--api-key or VIGIL_API_KEY)")
	}
	if len(guard.Rules) == 0 && *dataset == "" {
		// No rule now and none can come (no dataset to follow): nothing
		// is checked, so the session need not build and keep events for
		// checks (pin verdicts still apply).
		opt.Guard = nil
	}
	code, err := mcp.RunStdio(ctx, mcp.StdioConfig{Command: command, Session: opt, Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err != nil {
		return exitCode(code, err.Error())
	}
	if code != 0 {
		return exitCode(code, "")
	}
	return nil
}

// printableASCII reports whether v is 1 to n printable ASCII characters.
func printableASCII(v string, n int) bool {
	if v == "" || len(v) > n {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// defaultMCPDir is ~/.vigil/<name>, or "" without a home folder.
func defaultMCPDir(name string) string {
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".vigil", name)
	}
	return ""
}

// fetchMCPRules loads the enabled guardrails of the caller's dataset
// that apply to MCP (3 s timeout), keeping a copy in cacheDir that is
// used when the server cannot be reached.
func fetchMCPRules(ctx context.Context, c *client.Client, dataset, cacheDir string) ([]*mcp.Rule, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cache := ""
	if cacheDir != "" {
		h := sha256.Sum256([]byte(c.BaseURL()))
		cache = filepath.Join(cacheDir, "rules-"+hex.EncodeToString(h[:6])+"-"+dataset+".json")
	}
	var policies []client.Guardrail
	id, err := c.Identity(ctx)
	var list *client.GuardrailList
	if err == nil {
		list, err = c.Guardrails(ctx, id.Username, dataset, client.GuardrailFilter{Kind: "mcp"})
	}
	var ae *client.APIError
	switch {
	case errors.As(err, &ae) && (ae.StatusCode == 404 || ae.StatusCode == 403):
		// No such dataset yet: no rules.
	case err != nil && ae == nil && cache != "":
		b, rerr := os.ReadFile(cache)
		if rerr != nil || json.Unmarshal(b, &policies) != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		policies = list.Policies
		if cache != "" {
			if b, merr := json.Marshal(policies); merr == nil && os.MkdirAll(cacheDir, 0o700) == nil {
				_ = os.WriteFile(cache, b, 0o600)
			}
		}
	}
	var out []*mcp.Rule
	for _, g := range policies {
		if !g.Enabled {
			continue
		}
		r, err := mcp.LoadRule(g.ID, g.Name, g.Content, g.Action)
		if err != nil {
			return nil, err
		}
		r.Version = g.Version
		if g.Scope != nil {
			r.Servers, r.Clients = g.Scope.MCPServers, g.Scope.MCPClients
		}
		out = append(out, r)
	}
	return out, nil
}

// followMCPRules follows the server's guardrail change feed and swaps in
// the dataset's new rules when they change (and once the server is
// reachable again after the rules could not be fetched at start).
func followMCPRules(ctx context.Context, c *client.Client, dataset, cacheDir string, fileRules []*mcp.Rule, g *mcp.Guard, log *slog.Logger) {
	after, started := int64(0), false
	delay := time.Second
	refresh := g.Unavailable != ""
	for ctx.Err() == nil {
		res, err := c.GuardrailChangesAfter(ctx, after, 30*time.Second)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, 30*time.Second)
			refresh = true
			continue
		}
		delay = time.Second
		for _, ch := range res.Changes {
			if ch.Dataset == dataset {
				refresh = true
			}
		}
		if started && after == 0 && res.Seq > 0 {
			// The feed's first change: "after=0" answers with the
			// position only, so any advance is a possible change here.
			refresh = true
		}
		if refresh || res.Reset {
			rules, err := fetchMCPRules(ctx, c, dataset, cacheDir)
			if err != nil {
				log.Warn("mcp: refreshing dataset guardrails failed", "dataset", dataset, "err", err)
			} else {
				g.SetRules(append(append([]*mcp.Rule(nil), fileRules...), rules...))
				log.Info("mcp: dataset guardrails updated", "dataset", dataset, "rules", len(rules))
				refresh = false
			}
		}
		if started && after == 0 && res.Seq == 0 {
			// Nothing has ever changed: "after=0" does not wait.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		after, started = res.Seq, true
	}
}

func mcpLogger(path string, verbose bool, stderr io.Writer) (*slog.Logger, func()) {
	if path == "" {
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, ".vigil", "logs", "mcp.log")
		}
	}
	var ws []io.Writer
	closeFn := func() {}
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
			if f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
				ws = append(ws, f)
				closeFn = func() { f.Close() }
			}
		}
	}
	if verbose {
		ws = append(ws, stderr)
	}
	if len(ws) == 0 {
		return slog.New(slog.DiscardHandler), closeFn
	}
	return slog.New(slog.NewTextHandler(io.MultiWriter(ws...), nil)), closeFn
}

func systemUser() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

func runMCPPins(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mcp pins", "mcp pins list [--server-name NAME] [--json] | approve <server> <tool> | approve <pin id> | forget <server> <tool> | forget <pin id>",
		"List the tool definitions pinned on the Vigil server, approve a changed definition\n"+
			"(the tool passes again at the client's next tools/list), or forget a pin (the next\n"+
			"sighting is trusted as new).", stderr)
	var sf serverFlags
	sf.register(fs)
	server := fs.String("server-name", "", "list only the pins of MCP server `NAME`")
	asJSON := fs.Bool("json", false, "print the pins as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return exitCode(2, "mcp pins: want list, approve or forget")
	}
	c, err := sf.client()
	if err != nil {
		return exitCode(2, "mcp pins: "+err.Error())
	}
	switch pos[0] {
	case "list":
		if len(pos) > 1 {
			return exitCode(2, "mcp pins list: unexpected argument "+pos[1])
		}
		pins, err := c.MCPPins(ctx, *server)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if pins == nil {
				pins = []client.MCPPin{}
			}
			return enc.Encode(pins)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SERVER\tTOOL\tSTATUS\tHASH\tID")
		for _, p := range pins {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Server, p.Tool, p.Status, shortHash(p.Hash), p.ID)
		}
		return tw.Flush()
	case "approve", "forget":
		pin, err := findPin(ctx, c, pos[1:])
		if err != nil {
			return err
		}
		if pos[0] == "forget" {
			if err := c.ForgetMCPPin(ctx, pin.ID); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "forgot %s/%s\n", pin.Server, pin.Tool)
			return nil
		}
		if pin.Status != "pending" {
			fmt.Fprintf(stdout, "%s/%s is already approved\n", pin.Server, pin.Tool)
			return nil
		}
		got, err := c.ApproveMCPPin(ctx, pin.ID)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "approved %s/%s (%s)\n", got.Server, got.Tool, shortHash(got.Hash))
		return nil
	}
	return exitCode(2, fmt.Sprintf("mcp pins: unknown action %q (want list, approve or forget)", pos[0]))
}

// findPin resolves "<server> <tool>" or "<pin id>".
func findPin(ctx context.Context, c *client.Client, args []string) (*client.MCPPin, error) {
	switch len(args) {
	case 1, 2:
	default:
		return nil, exitCode(2, "mcp pins: give <server> <tool> or a pin id")
	}
	server := ""
	if len(args) == 2 {
		server = args[0]
	}
	pins, err := c.MCPPins(ctx, server)
	if err != nil {
		return nil, err
	}
	for i := range pins {
		if len(args) == 2 && pins[i].Tool == args[1] || len(args) == 1 && pins[i].ID == args[0] {
			return &pins[i], nil
		}
	}
	return nil, exitCode(1, fmt.Sprintf("mcp pins: no pin %s", strings.Join(args, "/")))
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// mcpProxyConfig maps the gateway.mcp settings (and gateway.fail_mode)
// of the configuration file to the streamable HTTP proxy of an embedded
// server: `vigil serve` mounts mcp.NewProxy(mcpProxyConfig(…)) for the
// routes [/{dataset}]/mcp/streamable and [/{dataset}]/mcp/{server} of
// the gateway.
func mcpProxyConfig(fc *fileConfig, srv *server.Server, log *slog.Logger) mcp.ProxyConfig {
	return mcpProxyConfigWith(fc, mcp.NewServerBackend(srv), log)
}

// mcpProxyConfigWith is mcpProxyConfig with the given Backend: the
// standalone gateway's is an mcp.ClientBackend over the HTTP API.
func mcpProxyConfigWith(fc *fileConfig, backend mcp.Backend, log *slog.Logger) mcp.ProxyConfig {
	g := fc.Gateway
	cfg := mcp.ProxyConfig{
		Backend:              backend,
		AllowedUpstreamHosts: g.MCP.AllowedUpstreamHosts,
		AllowedOrigins:       g.MCP.AllowedOrigins,
		FailOpen:             g.FailMode.Value == "open",
		RugPullAction:        g.MCP.RugPullAction.Value,
		FailureFormat:        g.MCP.FailureResponseFormat.Value,
		Logger:               log,
	}
	for _, s := range g.MCP.Servers {
		cfg.Servers = append(cfg.Servers, mcp.ServerConfig{Name: s.Name, URL: s.URL, Headers: s.Headers, Timeout: time.Duration(s.Timeout)})
	}
	return cfg
}
