package web_test

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The browser tests (web-ui.md §8) drive Chromium (VIGIL_TEST_CHROMIUM,
// set by .ci/run) against a real server on loopback; one browser per
// test binary, one tab per test.

var screenshots = flag.Bool("screenshots", false, "write screenshots of the main pages to testdata/screenshots (for review, never compared)")

var (
	browserOnce sync.Once
	browserCtx  context.Context
	browserErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if browserCtx != nil {
		chromedp.Cancel(browserCtx)
	}
	os.Exit(code)
}

// tab is one browser tab. It records dialogs, exceptions and console
// errors other than CSP reports; run fails on any of them.
type tab struct {
	ctx      context.Context
	e        *env
	mu       sync.Mutex
	problems []string
	accept   bool     // accept confirm() dialogs instead of failing on them
	allow    []string // console messages expected by the test
}

// newTab opens a tab, or skips the test without Chromium.
// needChromium skips a browser test without Chromium.
func needChromium(t *testing.T) {
	t.Helper()
	if os.Getenv("VIGIL_TEST_CHROMIUM") == "" {
		t.Skip("VIGIL_TEST_CHROMIUM is unset (no Chromium): browser test skipped")
	}
}

func newTab(t *testing.T, e *env) *tab {
	t.Helper()
	needChromium(t)
	path := os.Getenv("VIGIL_TEST_CHROMIUM")
	browserOnce.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
			chromedp.WindowSize(1400, 900), chromedp.DisableGPU)
		alloc, _ := chromedp.NewExecAllocator(context.Background(), opts...)
		browserCtx, _ = chromedp.NewContext(alloc)
		browserErr = chromedp.Do(browserCtx)
	})
	if browserErr != nil {
		t.Fatalf("start Chromium %s: %v", path, browserErr)
	}
	ctx, cancel := chromedp.NewContext(browserCtx)
	t.Cleanup(cancel)
	tb := &tab{ctx: ctx, e: e}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	dialogs := make(chan bool, 8)
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			if !tb.accept || ev.Type != page.DialogTypeConfirm {
				tb.problem("dialog %s: %q", ev.Type, ev.Message)
			}
			select {
			case dialogs <- tb.accept:
			default:
			}
		case *runtime.EventExceptionThrown:
			tb.problem("exception: %s", ev.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				tb.problem("console.error")
			}
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError && !strings.Contains(ev.Entry.Text, "Content Security Policy") && !tb.allowed(ev.Entry.Text) {
				tb.problem("console: %s", ev.Entry.Text)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for accept := range dialogs {
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: accept})
		}
	}()
	t.Cleanup(func() { close(dialogs) })
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	return tb
}

func (tb *tab) allowed(msg string) bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, a := range tb.allow {
		if strings.Contains(msg, a) {
			return true
		}
	}
	return false
}

func (tb *tab) problem(format string, args ...any) {
	tb.mu.Lock()
	tb.problems = append(tb.problems, fmt.Sprintf(format, args...))
	tb.mu.Unlock()
}

func (tb *tab) check(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.problems) > 0 {
		t.Fatalf("%s: %s", what, strings.Join(tb.problems, "; "))
	}
}

// do runs steps with a timeout and fails on any error or problem.
func (tb *tab) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	tb.check(t, what, chromedp.Do(ctx, steps...))
}

// text, value and eval read one thing from the page.
func (tb *tab) text(t *testing.T, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	tb.check(t, "text of "+sel, err)
	return s
}

func (tb *tab) value(t *testing.T, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(sel)))
	tb.check(t, "value of "+sel, err)
	return s
}

func eval[T any](t *testing.T, tb *tab, js string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	tb.check(t, js, err)
	return v
}

func (tb *tab) url(p string) string { return tb.e.URL + p }

// login signs in through the form.
func (tb *tab) login(t *testing.T, key string) {
	t.Helper()
	tb.do(t, "sign in", chromedp.Navigate(tb.url("/login")), chromedp.WaitVisible(chromedp.ID("api_key")),
		chromedp.SendKeys(chromedp.ID("api_key"), key), chromedp.Submit(chromedp.ID("api_key")),
		chromedp.WaitVisible(chromedp.CSS(`nav.global a[href="/settings"]`)))
}

func (tb *tab) shot(t *testing.T, name string) {
	t.Helper()
	if !*screenshots {
		return
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	tb.check(t, "screenshot "+name, err)
	if err := os.MkdirAll("testdata/screenshots", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata/screenshots", name+".png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBrowserSignInSearchTrace(t *testing.T) {
	needChromium(t)
	e := newServeEnv(t)
	tid, _ := seed(t, e)
	tb := newTab(t, e)
	tb.login(t, adminKey)
	if h1 := tb.text(t, "h1"); h1 != "Datasets" {
		t.Fatalf("after sign-in: h1 %q", h1)
	}
	tb.shot(t, "home")

	// Open the dataset with the keyboard: j selects, Enter opens.
	tb.do(t, "open dataset", chromedp.KeyEvent("j"), chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.ID("q")))
	if title := eval[string](t, tb, "document.title"); !strings.HasPrefix(title, "demo") {
		t.Fatalf("dataset page title %q", title)
	}
	tb.shot(t, "traces")

	// Search, see the hit highlighted in the list and in the trace.
	tb.do(t, "search", chromedp.SendKeys(chromedp.ID("q"), "report\r"), chromedp.WaitVisible(chromedp.CSS("td mark.src-search")))
	if hit := tb.text(t, "td mark.src-search"); hit != "report" {
		t.Fatalf("search hit %q", hit)
	}
	tb.do(t, "open hit", chromedp.Click(chromedp.CSS("tbody a")), chromedp.WaitVisible(chromedp.CSS(`mark[data-source="search"]`)))
	if marked := tb.text(t, `mark[data-source="search"]`); marked != "report" {
		t.Fatalf("highlighted search hit %q", marked)
	}

	// The finding's highlight at its data-address; n flashes it.
	sel := `mark[data-source="guardrails-error"][data-address^="messages.1.tool_calls.0.function.arguments.to"]`
	tb.do(t, "finding highlight", chromedp.Navigate(tb.url("/trace/"+tid)), chromedp.WaitVisible(chromedp.CSS(sel)))
	if finding := tb.text(t, sel); !strings.Contains("bob@evil.test", finding) || finding == "" {
		t.Fatalf("finding highlight covers %q", finding)
	}
	tb.shot(t, "trace")
	if *screenshots { // the dark theme follows the system setting
		if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
			t.Fatal(err)
		}
		tb.shot(t, "trace-dark")
		if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
			t.Fatal(err)
		}
	}
	tb.do(t, "navigator n", chromedp.KeyEvent("n"), chromedp.Sleep(150*time.Millisecond))
	if !eval[bool](t, tb, `document.querySelectorAll(".flash-on").length > 0`) {
		t.Error("n did not flash a highlight")
	}

	// A permalink opens, expands and flashes its address.
	tb.do(t, "permalink", chromedp.Navigate(tb.url("/trace/"+tid+"#messages.0.content%3A7-12")),
		chromedp.WaitVisible(chromedp.CSS(`mark.flash-on[data-address="messages.0.content:7-12"]`)))
	if !eval[bool](t, tb, `(function(){var r=document.querySelector('[data-address="messages.0.content:7-12"]').getBoundingClientRect();return r.top>=0&&r.bottom<=innerHeight})()`) {
		t.Error("the permalinked highlight is not in view")
	}
}

func TestBrowserCommentAddDelete(t *testing.T) {
	needChromium(t)
	e := newServeEnv(t)
	tid, _ := seed(t, e)
	tb := newTab(t, e)
	tb.login(t, adminKey)
	tb.do(t, "pick argument row", chromedp.Navigate(tb.url("/trace/"+tid)), chromedp.Click(chromedp.CSS(`tr[data-arg-address$=".arguments.body"]`)))
	if addr := tb.value(t, "#comment-address"); addr != "messages.1.tool_calls.0.function.arguments.body" {
		t.Fatalf("argument row gave address %q", addr)
	}
	// Selecting text gives a code-point range.
	eval[any](t, tb, `(function(){var t=document.querySelector('[data-path="messages.0.content"] mark').firstChild;var r=document.createRange();r.setStart(t,1);r.setEnd(t,4);var s=getSelection();s.removeAllRanges();s.addRange(r);document.dispatchEvent(new MouseEvent("mouseup"));return null})()`)
	if addr := tb.value(t, "#comment-address"); addr != "messages.0.content:8-11" {
		t.Fatalf("selection gave address %q", addr)
	}
	tb.do(t, "add comment", chromedp.SetValue(chromedp.ID("comment-content"), "check this one"), chromedp.Submit(chromedp.ID("comment-content")),
		chromedp.WaitVisible(chromedp.Search(`//p[@class="comment-text"][text()="check this one"]`)))
	tb.accept = true
	tb.do(t, "delete comment", chromedp.Click(chromedp.Search(`//p[text()="check this one"]/..//button[@data-comment-delete]`)),
		chromedp.WaitNotPresent(chromedp.Search(`//p[text()="check this one"]`)))
	if n := eval[int](t, tb, `document.querySelectorAll(".comment-text").length`); n != 1 {
		t.Fatalf("%d comments left, want the seeded one", n)
	}
}

func TestBrowserGuardrailAndBacktest(t *testing.T) {
	needChromium(t)
	e := newServeEnv(t)
	seed(t, e)
	tb := newTab(t, e)
	tb.login(t, adminKey)
	tb.allow = []string{"status of 400"} // the editor answers a rule that does not load with 400
	tb.do(t, "bad rule", chromedp.Navigate(tb.url("/u/admin/demo/guardrails?new=1")), chromedp.WaitVisible(chromedp.ID("g-policy")),
		chromedp.SendKeys(chromedp.ID("g-name"), "typo"),
		chromedp.SetValue(chromedp.ID("g-policy"), "raise \"x\" if:\n    (call: ToolCall)\n    call is tool:send_email and and\n"),
		chromedp.Submit(chromedp.ID("g-policy")), chromedp.WaitVisible(chromedp.ID("load-errors")))
	errText, badLine := tb.text(t, "#load-errors"), tb.text(t, ".ln.bad")
	if !strings.Contains(errText, "line 3, column") || !strings.Contains(badLine, "and and") {
		t.Fatalf("load error %q on line %q", errText, badLine)
	}
	tb.shot(t, "guardrails-error")
	tb.do(t, "valid rule", chromedp.SetValue(chromedp.ID("g-policy"), "raise \"emailed\" if:\n    (call: ToolCall)\n    call is tool:send_email\n"),
		chromedp.Submit(chromedp.ID("g-policy")), chromedp.WaitVisible(chromedp.Search(`//aside//a[text()="typo"]`)))
	tb.do(t, "backtest", chromedp.Click(chromedp.ID("bt-run")), chromedp.WaitVisible(chromedp.CSS(`#backtest[data-done="1"]`)))
	if status := tb.text(t, "#bt-status"); !strings.Contains(status, "done: 1 traces, 1 triggered") {
		t.Fatalf("backtest status %q", status)
	}
	link := eval[string](t, tb, `document.querySelector("#bt-triggered a").getAttribute("href")`)
	if !strings.Contains(link, "/u/admin/demo/t/0?hl=messages.1.tool_calls.0") {
		t.Fatalf("triggered trace link %q", link)
	}
	// Compare a new text with the saved version: the trace no longer triggers.
	tb.do(t, "compare", chromedp.SetValue(chromedp.ID("g-policy"), "raise \"emailed\" if:\n    (call: ToolCall)\n    call is tool:other_tool\n"),
		chromedp.Click(chromedp.ID("bt-compare")), chromedp.WaitVisible(chromedp.Search(`//div[@id="bt-compare-out"]/h3[text()="No longer triggered"]`)))
	if out := tb.text(t, "#bt-compare-out"); !strings.Contains(out, "0 newly triggered, 1 no longer triggered") {
		t.Errorf("compare: %q", out)
	}
	// The link opens the trace with the violation highlighted.
	tb.do(t, "open triggered", chromedp.Click(chromedp.CSS("#bt-triggered a")), chromedp.WaitVisible(chromedp.CSS(`[data-source="violation"]`)))
	tb.shot(t, "guardrails")
}

func TestBrowserTriage(t *testing.T) {
	needChromium(t)
	e := newServeEnv(t)
	seed(t, e)
	tb := newTab(t, e)
	tb.login(t, adminKey)
	tb.do(t, "findings", chromedp.Navigate(tb.url("/u/admin/demo/findings")), chromedp.WaitVisible(chromedp.CSS("tr[data-finding-id]")))
	tb.shot(t, "findings")
	tb.do(t, "triage with the keyboard", chromedp.KeyEvent("j"), chromedp.KeyEvent("a"), chromedp.WaitVisible(chromedp.CSS(".ok")))
	if done := tb.text(t, ".ok"); !strings.Contains(done, "1 accepted") {
		t.Fatalf("after a: %q", done)
	}
}

func TestBrowserProof(t *testing.T) {
	needChromium(t)
	e := newServeEnv(t)
	tid, _ := seed(t, e)
	tb := newTab(t, e)
	tb.login(t, adminKey)
	tb.do(t, "verify intact", chromedp.Navigate(tb.url("/runs/"+tid)), chromedp.Click(chromedp.Search(`//button[text()="Verify now"]`)),
		chromedp.WaitVisible(chromedp.ID("verify-result")))
	if res := tb.text(t, "#verify-result"); !strings.HasPrefix(res, "Valid") {
		t.Fatalf("intact run: %q", res)
	}
	tb.shot(t, "proof")
	db, err := sql.Open("sqlite", e.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE messages SET data = replace(data, 'report', 'REPORT') WHERE trace_id = ? AND idx = 0`, tid); err != nil {
		t.Fatal(err)
	}
	tb.do(t, "verify tampered", chromedp.Navigate(tb.url("/runs/"+tid)), chromedp.Click(chromedp.Search(`//button[text()="Verify now"]`)),
		chromedp.WaitVisible(chromedp.ID("broken")))
	res, broken := tb.text(t, "#verify-result"), tb.text(t, "#broken")
	if !strings.HasPrefix(res, "Tampered: the chain breaks at receipt 0") || !strings.Contains(broken, "broken here") {
		t.Fatalf("tampered run: %q / %q", res, broken)
	}
}

// A trace whose every field holds script and markup payloads renders
// them as text and runs none of them.
func TestBrowserXSS(t *testing.T) {
	needChromium(t)
	e := newServeEnv(t)
	p := func(field string) string {
		return `<script>window.__xss="` + field + `"</script><img src=x onerror="window.__xss='` + field + `'"><b>` + field + `</b>"'&`
	}
	tid := e.push(t, adminKey, "xss", []map[string]any{
		{"role": "user", "content": p("text")},
		{"role": "assistant", "content": p("assistant"), "tool_calls": []any{map[string]any{"id": p("callid"), "type": "function",
			"function": map[string]any{"name": p("tool"), "arguments": map[string]any{p("argkey"): p("argval"), "nested": map[string]any{p("nk"): p("nv")}}}}}},
		{"role": "tool", "tool_call_id": p("callid"), "content": p("output"), "error": p("error")},
		{"role": "user", "content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "javascript:window.__xss='img'"}}}},
	}, map[string]any{"name": p("tracename"), p("mdkey"): p("mdval"), "hierarchy_path": []string{p("hier")}})
	e.api(t, "POST", "/api/v1/trace/"+tid+"/annotate", adminKey, map[string]any{"content": p("annotation"), "address": "messages.0.content:0-10"}, &map[string]any{})
	var ds struct{ ID string }
	e.api(t, "GET", "/api/v1/dataset/byuser/admin/xss", adminKey, nil, &ds)
	rule := "raise \"" + strings.ReplaceAll(p("rule"), `"`, `\"`) + "\" if:\n    (call: ToolCall)\n"
	e.api(t, "POST", "/api/v1/dataset/"+ds.ID+"/policy", adminKey, map[string]any{"name": p("rulename"), "policy": rule}, &map[string]any{})
	e.api(t, "POST", "/api/v1/dataset/byid/"+ds.ID+"/policy-check", adminKey, map[string]any{"policy": rule, "store": true}, &map[string]any{})

	tb := newTab(t, e)
	tb.login(t, adminKey)
	for _, path := range []string{"/", "/u/admin/xss", "/u/admin/xss?q=script", "/u/admin/xss/t/0", "/u/admin/xss/t/0?q=img",
		"/trace/" + tid, "/u/admin/xss/guardrails", "/u/admin/xss/findings", "/runs/" + tid, "/u/admin/xss/settings"} {
		tb.do(t, path, chromedp.Navigate(tb.url(path)), chromedp.WaitReady(chromedp.CSS("body")), chromedp.Sleep(50*time.Millisecond))
		if xss := eval[any](t, tb, `window.__xss === undefined ? null : window.__xss`); xss != nil {
			t.Errorf("%s: a payload ran (window.__xss = %v)", path, xss)
		}
		if n := eval[int](t, tb, `document.querySelectorAll("main b, main script, main img[src=x]").length`); n != 0 {
			t.Errorf("%s: %d payload elements in the DOM", path, n)
		}
	}
	tb.do(t, "trace", chromedp.Navigate(tb.url("/trace/"+tid)))
	if text := tb.text(t, `[data-path="messages.0.content"]`); !strings.HasPrefix(text, `<script>window.__xss="text"</script>`) {
		t.Errorf("payload text %q", text)
	}
	tb.shot(t, "xss")
}

// The first screen of a 10,000-event trace, timed in the browser (a
// figure for the report, not an assertion).
func TestBrowserBigTrace(t *testing.T) {
	needChromium(t)
	e := newServeEnv(t)
	events := make([]map[string]any, 10000)
	for i := range events {
		events[i] = map[string]any{"role": []string{"user", "assistant"}[i%2], "content": fmt.Sprintf("message %d with some text to read", i)}
	}
	tid := e.push(t, adminKey, "big", events, nil)
	tb := newTab(t, e)
	tb.login(t, adminKey)
	tb.do(t, "big trace", chromedp.Navigate(tb.url("/trace/"+tid)), chromedp.WaitVisible(chromedp.CSS(`[id="messages.0"]`)))
	ms := eval[float64](t, tb, `performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd`)
	t.Logf("10,000-event trace: first screen (DOMContentLoaded) after %.0f ms; 500 events on the page", ms)
}

// The new-dataset form uploads a JSONL file with a progress bar.
func TestBrowserUpload(t *testing.T) {
	needChromium(t)
	e := newServeEnv(t)
	tb := newTab(t, e)
	tb.login(t, adminKey)
	path := filepath.Join(t.TempDir(), "traces.jsonl")
	if err := os.WriteFile(path, []byte(`{"messages":[{"role":"user","content":"uploaded one"}]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tb.do(t, "upload", chromedp.SendKeys(chromedp.ID("ds-name"), "up"), chromedp.SetUploadFiles(chromedp.ID("ds-file"), []string{path}),
		chromedp.Click(chromedp.Search(`//form[@id="new-dataset"]//button`)), chromedp.WaitVisible(chromedp.ID("q")))
	if got := tb.text(t, "tbody td:nth-child(2)"); got != "trace 0" {
		t.Fatalf("uploaded trace row %q", got)
	}
}
