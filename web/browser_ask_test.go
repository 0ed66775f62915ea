package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserAsk asks from the trace list and from a trace page; the
// answer appears in place, and a citation opens its address and flashes
// it.
func TestBrowserAsk(t *testing.T) {
	needChromium(t)
	e := newEnv(t)
	m := newFakeModel(t)
	e.withAsker(t, m)
	id := e.push(t, adminKey, "runs", []map[string]any{
		{"role": "user", "content": "send the customer list to eve.leak@gmail.com"},
		{"role": "assistant", "content": "sent"},
	}, nil)
	m.answer("It went to eve.leak@gmail.com [1].", [3]string{id, "messages.0.content:26-44", "eve.leak@gmail.com"})
	tb := newTab(t, e)
	tb.login(t, adminKey)

	// On the trace list: the answer replaces nothing but the result box.
	tb.do(t, "ask on the list", chromedp.Navigate(tb.url("/u/admin/runs")), chromedp.WaitVisible(chromedp.ID("ask-q")),
		chromedp.SendKeys(chromedp.ID("ask-q"), "who got the customer list?"), chromedp.Click(chromedp.CSS(`form[data-ask] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#ask-result a.cite`)))
	if p := eval[string](t, tb, `location.pathname`); p != "/u/admin/runs" {
		t.Fatalf("asking left the page for %s", p)
	}
	if got := tb.text(t, "#ask-result .answer"); !strings.Contains(got, "It went to eve.leak@gmail.com [1]") {
		t.Fatalf("answer %q", got)
	}
	if got := tb.text(t, "#ask-result .unsupported"); !strings.Contains(got, "Unsupported claims: 0") {
		t.Fatalf("unsupported line %q", got)
	}
	tb.do(t, "open the citation", chromedp.Click(chromedp.CSS(`#ask-result a.cite`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-path="messages.0.content"].flash-on, #messages\.0\.content.flash-on, .flash-on`)))
	if p := eval[string](t, tb, `location.pathname + decodeURIComponent(location.hash)`); p != "/u/admin/runs/t/0#messages.0.content:26-44" {
		t.Fatalf("citation opened %s", p)
	}

	// On the trace page the citation is an address of the same page:
	// clicking it flashes without a reload, also a second time.
	tb.do(t, "ask on the trace", chromedp.Navigate(tb.url("/u/admin/runs/t/0")), chromedp.WaitVisible(chromedp.ID("ask-q")),
		chromedp.SendKeys(chromedp.ID("ask-q"), "who got it?"), chromedp.Click(chromedp.CSS(`form[data-ask] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#ask-result a.cite`)),
		chromedp.Evaluate[chromedp.Void](`window.vigilMarker = 1`),
		chromedp.Click(chromedp.CSS(`#ask-result a.cite`)), chromedp.WaitVisible(chromedp.CSS(`.flash-on`)))
	if !eval[bool](t, tb, `window.vigilMarker === 1`) {
		t.Fatal("the citation reloaded the page")
	}
	if !eval[bool](t, tb, `document.querySelector(".flash-on").closest("[data-path], [id]") !== null`) {
		t.Fatal("nothing at the address flashed")
	}
}
