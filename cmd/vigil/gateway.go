package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/mcp"
	"github.com/vigilhq/vigil/server"
)

// vigil gateway: the standalone LLM gateway (docs/gateway.md), and the
// embedded gateway's set-up for vigil serve.

func init() {
	register(command{name: "gateway", summary: "run the standalone LLM gateway in front of a Vigil server", run: runGateway})
}

// mountGateway serves /api/v1/gateway/ on srv unless gateway.enabled is
// false; with a dataDir the session index is kept in
// <dataDir>/gateway-sessions.jsonl. The returned func stops its recorder
// (after in-flight records).
func mountGateway(srv *server.Server, fc *fileConfig, log *slog.Logger, dataDir string) (func(), error) {
	vals, err := gatewayValues(fc, nil, nil)
	if err != nil {
		return nil, err
	}
	if vals["enabled"] == "false" {
		return func() {}, nil
	}
	opts, ro, err := gatewayOptions(fc, vals, srv.Rules())
	if err != nil {
		return nil, err
	}
	auth, rules, comp, rec := gateway.Embedded(srv, ro)
	opts.Auth, opts.Rules, opts.Compiler, opts.Recorder, opts.Logger = auth, rules, comp, rec, log
	// The MCP routes ([/{dataset}]/mcp/streamable and /mcp/{server}):
	// the MCP proxy, recording and pinning in-process.
	mp := mcp.NewProxy(mcpProxyConfig(fc, srv, log))
	opts.MCP = mp
	if dataDir != "" {
		opts.SessionFile = filepath.Join(dataDir, "gateway-sessions.jsonl")
	}
	gw, err := gateway.New(opts)
	if err != nil {
		mp.Close(context.Background())
		rec.Close()
		return nil, err
	}
	srv.Mount(gateway.Prefix, gw)
	stopWatch := watchGlobal(gw, fc, vals, srv.Rules())
	var once sync.Once
	return func() {
		once.Do(func() {
			stopWatch()
			gw.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			mp.Close(ctx)
			cancel()
			rec.Close()
		})
	}, nil
}

func runGateway(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("gateway", "gateway --store-url URL [--listen 127.0.0.1:8005] [--data-dir DIR] [flags]",
		"Run the LLM gateway on its own, in front of the Vigil server at --store-url. Clients point\n"+
			"their OpenAI, Anthropic or Gemini SDK at http://LISTEN/api/v1/gateway/[DATASET/]{openai|anthropic|gemini}/\n"+
			"and their MCP client at http://LISTEN/api/v1/gateway/[DATASET/]mcp/{streamable|SERVER}\n"+
			"and send their Vigil key in Invariant-Authorization: Bearer KEY. Rules are fetched with the\n"+
			"caller's key, cached and kept fresh by the server's change feed, and evaluated here; calls\n"+
			"are recorded through the push API, spooled under <data-dir>/spool when the server is\n"+
			"unreachable, and replayed at the next start. Global rule files reload when they change\n"+
			"or on SIGHUP. Settings: flags > VIGIL_GATEWAY_* > the config file's gateway section >\n"+
			"defaults.", stderr)
	fc, err := loadConfig(configFlag(args))
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	fs.String("config", "", "configuration file (env VIGIL_CONFIG)")
	listen := fs.String("listen", envOr("VIGIL_GATEWAY_LISTEN", cmp.Or(fc.Gateway.Listen, "127.0.0.1:8005")), "listen address (env VIGIL_GATEWAY_LISTEN; config gateway.listen)")
	storeURL := fs.String("store-url", envOr("VIGIL_GATEWAY_STORE_URL", fc.Gateway.StoreURL), "the Vigil server (env VIGIL_GATEWAY_STORE_URL; config gateway.store_url)")
	dataDir := fs.String("data-dir", envOr("VIGIL_DATA_DIR", fc.DataDir), "data directory: the spool lives in <data-dir>/spool, the session index in <data-dir>/gateway-sessions.jsonl (default ~/.vigil)")
	logLevel := fs.String("log-level", envOr("VIGIL_LOG_LEVEL", cmp.Or(fc.Log.Level.Value, "info")), "log level: debug, info, warn or error")
	logFormat := fs.String("log-format", envOr("VIGIL_LOG_FORMAT", cmp.Or(fc.Log.Format.Value, "text")), "log format: text or json")
	flags := addGatewayFlags(fs)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *storeURL == "" {
		return exitCode(2, "gateway: --store-url is required (the Vigil server recording the calls)")
	}
	base, err := client.ParseURL(*storeURL)
	if err != nil {
		return fmt.Errorf("gateway: --store-url: %w", err)
	}
	vals, err := gatewayValues(fc, fs, flags)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	handler, err := newLogHandler(stderr, *logFormat, *logLevel)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	log := slog.New(handler)
	comp := policyCompiler{}
	opts, ro, err := gatewayOptions(fc, vals, comp)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if *dataDir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("gateway: --data-dir: %w", err)
		}
		*dataDir = filepath.Join(home, ".vigil")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("gateway: listen on %s: %w (is another gateway running there?)", *listen, err)
	}
	defer ln.Close()
	remote := gateway.NewRemote(base, comp, log)
	defer remote.Close()
	rec, err := gateway.NewClientRecorder(base, spoolDir(*dataDir), ro.QueueSize, log)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	opts.Auth, opts.Rules, opts.Compiler, opts.Recorder, opts.Logger = remote, remote, comp, rec, log
	// The MCP routes: the MCP proxy, with keys, dataset rules, pins and
	// recording through the server's HTTP API.
	mb := mcp.NewClientBackend(base, filepath.Join(spoolDir(*dataDir), "mcp"), log)
	defer mb.Close()
	mp := mcp.NewProxy(mcpProxyConfigWith(fc, mb, log))
	opts.MCP = mp
	opts.SessionFile = filepath.Join(*dataDir, "gateway-sessions.jsonl")
	gw, err := gateway.New(opts)
	if err != nil {
		mp.Close(context.Background())
		rec.Close()
		return fmt.Errorf("gateway: %w", err)
	}
	defer watchGlobal(gw, fc, vals, comp)()
	mux := http.NewServeMux()
	mux.Handle(gateway.Prefix, gw)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"status": "ok"}`)) })
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(handler, slog.LevelWarn)}
	log.Info("gateway listening on http://"+ln.Addr().String()+gateway.Prefix, "store_url", base, "spool", spoolDir(*dataDir))
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("gateway: %w", err)
		}
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	hs.Shutdown(sctx)
	gw.Close()
	mp.Close(sctx)
	rec.Close()
	return nil
}
