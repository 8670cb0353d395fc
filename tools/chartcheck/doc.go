// Package chartcheck holds the test that renders agentd's Helm chart
// (deploy/helm/agentd) with the Helm pinned in this module, for each values
// file in its ci/ folder, and validates what it renders. It lives in
// the tools module, beside Helm and the Kubernetes API types it depends on,
// so that the main module does not.
package chartcheck
