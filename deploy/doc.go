// Package deploy holds no code: its tests check acpgate's deployment
// files (the Kubernetes manifests, the Helm chart, the systemd unit).
//
// It is a module of its own so that the product module does not depend on
// Helm or the Kubernetes API types, which only these tests need.
package deploy
