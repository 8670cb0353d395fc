package app

import (
	"context"
	"testing"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// X-O5: the store's and the bridge's watches each report their own cause,
// and the AgentService and readiness are SERVING only when neither is
// down and agentd is not draining; liveness stays SERVING throughout.
func TestReadinessCombinesCauses(t *testing.T) {
	t.Parallel()
	const (
		serving    = healthpb.HealthCheckResponse_SERVING
		notServing = healthpb.HealthCheckResponse_NOT_SERVING
	)
	type step struct {
		name   string
		change func(r *readiness)
		want   healthpb.HealthCheckResponse_ServingStatus
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "store down and back", steps: []step{
			{"store down", func(r *readiness) { r.setStoreDown(true) }, notServing},
			{"store back", func(r *readiness) { r.setStoreDown(false) }, serving},
		}},
		{name: "bridge down and back", steps: []step{
			{"bridge down", func(r *readiness) { r.setBridgeDown(true) }, notServing},
			{"bridge back", func(r *readiness) { r.setBridgeDown(false) }, serving},
		}},
		{name: "both down: one back is not enough", steps: []step{
			{"store down", func(r *readiness) { r.setStoreDown(true) }, notServing},
			{"bridge down", func(r *readiness) { r.setBridgeDown(true) }, notServing},
			{"store back", func(r *readiness) { r.setStoreDown(false) }, notServing},
			{"bridge back", func(r *readiness) { r.setBridgeDown(false) }, serving},
		}},
		{name: "a dependency back while draining", steps: []step{
			{"bridge down", func(r *readiness) { r.setBridgeDown(true) }, notServing},
			{"drain", func(r *readiness) { r.drain() }, notServing},
			{"bridge back", func(r *readiness) { r.setBridgeDown(false) }, notServing},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hs := health.NewServer()
			r := newReadiness(hs)
			check := func(when, service string, want healthpb.HealthCheckResponse_ServingStatus) {
				t.Helper()
				res, err := hs.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
				if err != nil || res.GetStatus() != want {
					t.Errorf("%s: %q is %v (%v), want %v", when, service, res.GetStatus(), err, want)
				}
			}
			check("at start", HealthReadiness, serving)
			for _, s := range tt.steps {
				s.change(r)
				check(s.name, agentdv1.AgentService_ServiceDesc.ServiceName, s.want)
				check(s.name, HealthReadiness, s.want)
				check(s.name, HealthLiveness, serving)
			}
		})
	}
}
