// Package faultsuite is agentd's fault-injection suite: whole agentd
// instances (the AgentService with its embedded bridge) facing MCP servers
// that crash, hang, flood their output or answer too much; HTTP MCP
// servers that fail, reset connections, restart or trickle; provider APIs
// that storm, truncate or garble their streams; and clients that vanish.
// Each case checks what the user sees and that nothing leaked: no
// goroutine, child process, open file or bridge session outlives it.
//
// The package holds tests only. `go test ./internal/faultsuite/` (part of
// `make test`) runs every case once; `make stress` builds with the stress
// tag and also runs them many times over, concurrently.
package faultsuite
