// Package e2e is acpgate's end-to-end suite: every test builds the real
// acpgate binary (once per run) and the scriptable test agent, starts
// `acpgate serve` as a process (as root, as an unprivileged user, inside
// limits, beside a real PostgreSQL, Prometheus or TLS peer), and checks
// from outside what the README and docs/ promise: over gRPC, on the
// process's exit status and log, and on the processes it leaves behind.
//
// Tests of the command's own code (its flags, its rendering of a stream)
// live beside it in cmd/acpgate; tests of one package live in that
// package.
package e2e
