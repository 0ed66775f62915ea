// Package lazyregexp is a regular expression that compiles on first use,
// for package-level variables: a process compiles only the patterns it
// runs, so a command that never reaches one (`vigil version`) does not
// pay for it at start-up, as it does for regexp.MustCompile in a var.
// It is the standard library's internal/lazyregexp, cut down.
//
// Goals: the methods of *regexp.Regexp that Vigil's tables use, safe for
// concurrent use. Non-goals: patterns that are not constants; an invalid
// pattern panics on first use as MustCompile would at init, so every
// table's tests must use (or Compile) each of its patterns.
package lazyregexp

import (
	"regexp"
	"sync"
	"sync/atomic"
)

// Regexp is a regular expression compiled on first use. Create it with
// New; the zero value is not usable.
type Regexp struct {
	pattern string
	once    sync.Once
	rx      atomic.Pointer[regexp.Regexp]
}

// New returns pattern, to be compiled by regexp.MustCompile on first use.
func New(pattern string) *Regexp { return &Regexp{pattern: pattern} }

// Regexp returns the compiled expression, compiling it on the first call.
func (r *Regexp) Regexp() *regexp.Regexp {
	if rx := r.rx.Load(); rx != nil {
		return rx
	}
	r.once.Do(func() { r.rx.Store(regexp.MustCompile(r.pattern)) })
	return r.rx.Load()
}

// Compiled reports whether the expression has been compiled.
func (r *Regexp) Compiled() bool { return r.rx.Load() != nil }

// String returns the pattern.
func (r *Regexp) String() string { return r.pattern }

// MatchString is regexp.(*Regexp).MatchString.
func (r *Regexp) MatchString(s string) bool { return r.Regexp().MatchString(s) }

// FindStringIndex is regexp.(*Regexp).FindStringIndex.
func (r *Regexp) FindStringIndex(s string) []int { return r.Regexp().FindStringIndex(s) }

// FindAllString is regexp.(*Regexp).FindAllString.
func (r *Regexp) FindAllString(s string, n int) []string { return r.Regexp().FindAllString(s, n) }

// ReplaceAllString is regexp.(*Regexp).ReplaceAllString.
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.Regexp().ReplaceAllString(src, repl)
}

// FindAllStringIndex is regexp.(*Regexp).FindAllStringIndex.
func (r *Regexp) FindAllStringIndex(s string, n int) [][]int {
	return r.Regexp().FindAllStringIndex(s, n)
}

// FindStringSubmatch is regexp.(*Regexp).FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string {
	return r.Regexp().FindStringSubmatch(s)
}

// ReplaceAllStringFunc is regexp.Regexp.ReplaceAllStringFunc.
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.Regexp().ReplaceAllStringFunc(src, repl)
}
