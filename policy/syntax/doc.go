// Package syntax is the front end of the Vigil policy language
// (spec/policy-language.md §2–§5): source positions and load errors, the
// token set, a hand-written lexer (logical lines, INDENT/DEDENT, every
// string form, pattern-only tokens) and a recursive-descent parser that
// produces the syntax tree of ast.go, plus a deterministic printer.
//
// Goals: every node and error carries a code-point position; all syntax
// errors of a file are reported at once (up to MaxErrors), each rendered as
// "file:line:col: msg" with the source line and a caret; parsing never
// panics on any input.
//
// Non-goals: name resolution, types, arity and every other load-time check
// beyond the grammar (package policy/check), evaluation (policy/eval).
package syntax
