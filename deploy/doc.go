// Package deploy holds the tests of agentd's deployment files: the
// Dockerfile at the repository's root, the image's configuration in
// image/agentd.yaml, and the agentd.yaml that the Helm chart in helm/agentd
// renders (testdata/ keeps the renderings, which tools/chartcheck checks
// against the chart).
package deploy
