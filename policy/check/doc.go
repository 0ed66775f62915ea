// Package check is the loader of the Vigil policy language: it takes a
// parsed file (package syntax) and reports every load-time error and warning
// of spec/policy-language.md §4 (imports, name resolution and scopes, typed
// variables, predicates, constants, input parameters, tool patterns,
// detector providers), each with its position and, for a misspelt name, a
// "did you mean X?" suggestion. A policy that checks is returned as a
// Program: rules with their variables and lines, predicates, constants, the
// resolution of every identifier, and a cost estimate, which is what the
// evaluator needs to plan and run it.
//
// Goals: all errors at once (up to syntax.MaxErrors), deterministic
// messages, no panics on any syntax tree (partial trees with Bad nodes
// included), and speed (microseconds for a typical policy).
//
// Non-goals: the table of built-ins, modules and detectors, which callers
// supply as a Universe (package builtin builds one); evaluation (package
// eval); parsing (package syntax).
package check
