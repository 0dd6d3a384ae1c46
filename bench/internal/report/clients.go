package report

import "github.com/acpgate/acpgate/bench/internal/job"

// ThroughputClients is the throughput section's clients, in the order
// each repetition runs them (see job.WithBaseline).
func ThroughputClients(baseline bool) []string {
	return job.WithBaseline([]string{"floor", "floor-sdk", "peer", "gateway", job.GatewayStream,
		job.OnNaive("floor"), job.OnNaive("gateway"), job.OnNaive(job.GatewayEach), job.OnNaive(job.GatewayStream)}, baseline)
}

// PacedClients is the paced section's, in the same way. FloorLoaded comes
// last: it loads the floor with what the working tree's gateway run of the
// same repetition burned.
func PacedClients(baseline bool) []string {
	return job.WithBaseline([]string{"floor", "peer", "gateway", job.GatewayStream,
		job.OnNaive("floor"), job.OnNaive("gateway"), job.OnNaive(job.GatewayEach), job.OnNaive(job.GatewayStream), job.FloorLoaded}, baseline)
}

// TurnsClients is the turns section's clients, in the order each round runs them.
func TurnsClients(baseline bool) []string {
	return job.WithBaseline([]string{job.OnNaive("floor"), job.OnNaive(job.Relay), job.OnNaive("gateway"), job.OnNaive(job.GatewayEach)}, baseline)
}

// TTFCClients is the time-to-first-chunk section's clients, in the order
// each run takes them.
func TTFCClients(baseline bool) []string {
	return job.WithBaseline([]string{"floor", job.FloorContained, "peer", "gateway"}, baseline)
}
