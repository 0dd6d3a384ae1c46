package metrics

import "github.com/prometheus/client_golang/prometheus"

// Cluster instruments a replica's part in a cluster of replicas: what an
// operator watches to see a replica lost, a database that does not answer
// renewals, or one replica relaying most of the traffic. Registered on
// every gateway, at zero on one that is not in a cluster.
type Cluster struct {
	live        prometheus.Gauge
	renewFailed prometheus.Counter
	reaped      prometheus.Counter
	leaseLost   prometheus.Counter
	rejoined    prometheus.Counter
	relayed     *prometheus.CounterVec
}

func newCluster() *Cluster {
	return &Cluster{
		live: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "acpgate_cluster_replicas", Help: "Replicas with a live lease, this one included, as this replica last read them.",
		}),
		renewFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "acpgate_cluster_lease_renewal_failures_total", Help: "Renewals of this replica's lease that failed (the database did not answer, or the lease was lost).",
		}),
		reaped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "acpgate_cluster_replicas_reaped_total", Help: "Lost replicas this replica reaped: their turns ended, their sessions released.",
		}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "acpgate_cluster_leases_lost_total", Help: "Times this replica lost its lease (it expired unrenewed, or was superseded) and stopped the agents it no longer owned.",
		}),
		rejoined: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "acpgate_cluster_rejoins_total", Help: "Times this replica joined the cluster again, with a new epoch, after losing its lease.",
		}),
		relayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acpgate_cluster_relayed_calls_total", Help: "Calls this replica relayed to the replica that runs their session, or that has room for a new one, by gRPC method.",
		}, []string{"method"}),
	}
}

func (c *Cluster) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.live, c.renewFailed, c.reaped, c.leaseLost, c.rejoined, c.relayed}
}

// Cluster is the cluster's instruments; nil (recording nothing) for a nil
// Metrics.
func (m *Metrics) Cluster() *Cluster {
	if m == nil {
		return nil
	}
	return m.cluster
}

// LiveReplicas records how many replicas have a live lease.
func (c *Cluster) LiveReplicas(n int) {
	if c != nil {
		c.live.Set(float64(n))
	}
}

// RenewalFailed counts a failed renewal of this replica's lease.
func (c *Cluster) RenewalFailed() {
	if c != nil {
		c.renewFailed.Inc()
	}
}

// Reaped counts n lost replicas reaped.
func (c *Cluster) Reaped(n int) {
	if c != nil && n > 0 {
		c.reaped.Add(float64(n))
	}
}

// LeaseLost counts a loss of this replica's lease.
func (c *Cluster) LeaseLost() {
	if c != nil {
		c.leaseLost.Inc()
	}
}

// Rejoined counts a join after a lost lease.
func (c *Cluster) Rejoined() {
	if c != nil {
		c.rejoined.Inc()
	}
}

// Relayed counts a call relayed to another replica; method is the gRPC
// method's full name (a bounded set).
func (c *Cluster) Relayed(method string) {
	if c != nil {
		c.relayed.WithLabelValues(method).Inc()
	}
}
