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
		job.OnNaive("floor"), job.OnNaive(job.Relay), job.OnNaive("gateway"), job.OnNaive(job.GatewayEach), job.OnNaive(job.GatewayStream), job.FloorLoaded}, baseline)
}

// TurnsClients is the turns section's clients, in the order its report
// gives them.
func TurnsClients(baseline bool) []string {
	return job.WithBaseline(turnsClients(), baseline)
}

// turnsClients is TurnsClients without a baseline, a new slice each time:
// WithBaseline returns the one it is given.
func turnsClients() []string {
	return []string{job.OnNaive("floor"), job.OnNaive(job.Relay), job.OnNaive("gateway"), job.OnNaive(job.GatewayEach)}
}

// TurnsOrder is the order in which round r (from 0) of the turns section
// runs its clients: TurnsClients turned by r places, each client's
// baseline right after it, so that over the rounds no client always runs
// right after the same other one, on a machine still settling from it.
func TurnsOrder(r int, baseline bool) []string {
	cs := turnsClients()
	k := r % len(cs)
	return job.WithBaseline(append(cs[k:], cs[:k]...), baseline)
}

// TTFCClients is the time-to-first-chunk section's clients, in the order
// each run takes them.
func TTFCClients(baseline bool) []string {
	return job.WithBaseline([]string{"floor", job.FloorContained, "peer", "gateway"}, baseline)
}

// relayRow explains the relay's rows, in every section that has them.
const relayRow = "The *relay* row is the least a gRPC gateway does (`acpbench relay`): it starts each agent as acpgate does by default, below its own priority and a bounded number at once, reads the agent on one goroutine and sends on another, joining the chunks that arrive while the stream is busy into one gRPC message as acpgate does by default, and records nothing; the gateway client calls it as it calls acpgate. Its distance from the floor is what a gRPC message per chunk, into a client process of its own, costs on this machine; the gateway's distance from it is what acpgate adds."
