package config

import (
	"time"

	"gopkg.in/yaml.v3"
)

// Cluster makes the gateway one of several replicas sharing a PostgreSQL
// store: any replica answers any call, forwarding to the replica that runs
// a session's agent what needs that process. Off unless Advertise is set.
type Cluster struct {
	// ReplicaID names this replica, stable across its restarts (a pod or
	// host name); the host name when empty.
	ReplicaID string
	// Advertise is the host:port other replicas reach this one at: its
	// gRPC listener, as seen from them. Setting it turns the cluster on.
	Advertise string
	// SecretFile holds the secret replicas share: a forwarded call carries
	// it, and only a call that does may speak for a caller another
	// replica authenticated. Required with a cluster.
	SecretFile string
	// LeaseTTL is how long a replica's lease lasts unrenewed: a replica
	// that stops renewing (killed, cut off) is reaped by the others this
	// long after its last renewal, at the latest one renewal interval
	// (LeaseTTL/3) later. DefaultLeaseTTL unless set.
	LeaseTTL time.Duration
	// CAFile holds the PEM CAs the other replicas' server certificates are
	// verified against, when the gateway serves TLS (tls.cert_file): a
	// replica then calls the others over TLS, presenting its own
	// certificate (tls.cert_file) as its client certificate, which an
	// mTLS listener verifies like any other. Required with tls.
	CAFile string
}

// Enabled reports whether the gateway is one replica of several.
func (c Cluster) Enabled() bool { return c.Advertise != "" }

// DefaultLeaseTTL bounds how long a lost replica's turns look running:
// short enough that a client waiting on one learns of the loss within
// seconds, long enough that a replica's pause (a GC, a slow disk) does not
// cost it its turns.
const DefaultLeaseTTL = 10 * time.Second

// MinLeaseTTL keeps renewals (every third of the TTL) from hammering the
// database.
const MinLeaseTTL = 600 * time.Millisecond

// cluster decodes the cluster block.
func (d *decoder) cluster(n *yaml.Node, c *Cluster) {
	f := field{"cluster", "cluster"}
	d.fields(n, f, "in cluster", map[string]func(*yaml.Node){
		"replica_id":  d.stringInto(&c.ReplicaID, f.child("replica_id"), true),
		"advertise":   d.stringInto(&c.Advertise, f.child("advertise"), true),
		"secret_file": d.stringInto(&c.SecretFile, f.child("secret_file"), true),
		"lease_ttl":   d.durationInto(&c.LeaseTTL, f.child("lease_ttl")),
		"ca_file":     d.stringInto(&c.CAFile, f.child("ca_file"), true),
	})
}

// cluster checks the cluster block against the rest of the configuration.
func (v *checker) cluster(c *Config) {
	cl := c.Cluster
	if !cl.Enabled() {
		return
	}
	if c.Store != StorePostgres {
		v.add("cluster.advertise", "cluster: replicas share their turns and sessions through PostgreSQL: set store: %s (store is %q)", StorePostgres, c.Store)
	}
	if !hasPort(cl.Advertise) {
		v.add("cluster.advertise", "cluster.advertise: %q must be the host:port other replicas reach this one at", cl.Advertise)
	}
	if cl.SecretFile == "" {
		v.add("cluster.secret_file", "cluster.secret_file is required: replicas prove to each other with it that a forwarded call comes from one of them")
	} else {
		v.readable("cluster.secret_file", cl.SecretFile)
	}
	switch {
	case c.TLS.Enabled() && cl.CAFile == "":
		v.add("cluster.ca_file", "cluster.ca_file is required with tls: the replicas call each other over TLS and verify each other's certificates against it")
	case !c.TLS.Enabled() && cl.CAFile != "":
		v.add("cluster.ca_file", "cluster.ca_file is set but tls is not: replicas call each other over TLS only when they serve it")
	default:
		v.readable("cluster.ca_file", cl.CAFile)
	}
	if cl.LeaseTTL < MinLeaseTTL {
		v.add("cluster.lease_ttl", "cluster.lease_ttl: %v is below the minimum of %v", cl.LeaseTTL, MinLeaseTTL)
	}
}
