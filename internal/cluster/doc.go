// Package cluster is what one gateway replica needs of the others: a lease
// in the shared store that says it is alive (Lease), connections to the
// other replicas (Peers), the credential a forwarded call carries
// (Secret), so that the replica that runs a session's agent can trust the
// caller another replica authenticated, and the replica's part in the
// cluster built of them (Replica): which replica a call runs on, local or
// relayed (router.go, from each RPC's route in package access), where a
// new session is placed, and the ending of a turn whose journal the store
// refused (handoff.go).
//
// The coordination itself is PostgreSQL's (see store.Cluster): leases,
// epochs, the constraint that makes an idempotency key run once, and the
// notifications that wake a watcher on another replica. Nothing here
// votes, gossips or elects.
package cluster
