// Package bench holds end-to-end benchmarks that need the whole vigil
// binary: they build it once, start `vigil serve` as a subprocess on a
// loopback port and measure it from outside (throughput, resident memory).
//
// Goals: numbers that include everything a deployment pays (HTTP, JSON,
// normalisation, signing, the store). Non-goals: micro-benchmarks (those
// sit beside the code as Benchmark* functions) and anything in the normal
// test run: the full-size runs here are skipped unless their environment
// variable is set.
package bench
