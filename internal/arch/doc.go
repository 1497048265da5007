// Package arch holds no code: its test keeps the import rules of
// docs/architecture.md true. It lists every package of the module with
// `go list` and checks which may import which.
package arch
