// Package archtest holds the test that keeps agentd's package layers as
// STYLE.md draws them, so that they hold by construction rather than by
// habit: bridge never imports server or providers; providers never import
// server, bridge or the app's wiring; nothing imports cmd; and one package
// alone starts child processes. It has no code of its own.
package archtest
