// Package eval is the evaluator of the Vigil policy language: it compiles a
// parsed policy into closures and evaluates its rules on a normalised trace
// (spec/policy-language.md §6–§12).
//
// Goals: the sequential semantics of §10.2 exactly — one violation per
// satisfying binding, failures isolated per binding (§10.9), keys and
// ranges as §11 defines them — computed without enumerating blindly:
//
//   - free variables are bound lazily, just before the first line that
//     mentions them, so a line that mentions one variable filters it before
//     any join (this is the partial evaluation of §10.8, restricted to the
//     cases where it is exact);
//   - candidates come from per-type and per-tool-name indexes built once per
//     trace (Model);
//   - flow lines between two event variables become constraints on the
//     binding of the later one, answered by binary search on positions in
//     the flattened sequence (§7.5), not by nested loops;
//   - a line that depends on one event variable is evaluated once per event
//     and analysis (Memo), and model-backed detector results are cached per
//     policy (Cache, §13.5);
//   - budgets (steps per rule, counting each value bound to a free
//     variable; wall time; violations and distinct failures per rule; the
//     size of each value a rule builds and their total, budget.go) and
//     context cancellation are checked as the evaluation runs (§10.10), so
//     a hostile rule stops with budget_exceeded and the others go on.
//
// Runtime errors travel as panics inside this package and are recovered
// where the spec places them: at a rule body line (a rule failure), at a
// rule (budget exhausted) and at Program.Run (cancellation, and any
// unexpected panic, which becomes an error naming the rule).
//
// Non-goals: parsing and load-time checks (packages syntax and check),
// decoding traces (package trace), the built-in functions and detectors
// (packages builtin and detect).
package eval
