package detect

import (
	"strings"

	"github.com/vigilhq/vigil/policy/builtin"
	"golang.org/x/net/html"
)

// HTMLData is the result of html_code: the alt texts of images and the
// links of a document.
type HTMLData struct {
	// AltTexts holds the alt attribute of every <img>, in document order.
	AltTexts []string
	// Links holds the href of every <a>, then every URL Links finds in the
	// text, without repeats, in first-occurrence order.
	Links []string
}

// HTMLCode parses text leniently as HTML (HTML5 tokenisation, so any
// string parses) and collects image alt texts and links.
func HTMLCode(text string) HTMLData {
	var d HTMLData
	seen := map[string]bool{}
	addLink := func(u string) {
		if !seen[u] {
			seen[u] = true
			d.Links = append(d.Links, u)
		}
	}
	z := html.NewTokenizer(strings.NewReader(text))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		if !hasAttr {
			continue
		}
		tag := string(name)
		if tag != "img" && tag != "a" {
			continue
		}
		for {
			k, v, more := z.TagAttr()
			switch {
			case tag == "img" && string(k) == "alt":
				d.AltTexts = append(d.AltTexts, string(v))
			case tag == "a" && string(k) == "href":
				addLink(string(v))
			}
			if !more {
				break
			}
		}
	}
	for _, u := range Links(text) {
		addLink(u)
	}
	return d
}

// Links returns the http:// and https:// URLs in text without repeats, in
// first-occurrence order (policy-language §13.3, builtin.Links). A URL runs
// to the next space, newline or double quote, so trailing punctuation stays
// part of it.
func Links(text string) []string {
	if !strings.Contains(text, "http") {
		return nil
	}
	return builtin.Links(text, map[string]bool{})
}
