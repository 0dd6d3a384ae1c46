// Package access decides who may make a call: authentication (Security,
// which names the caller from a client certificate, a bearer token or the
// sidecar's x-forwarded-client-cert header), authorization (Authz: who may
// use an agent, who sees a session or a turn), the declaration of every
// RPC's requirement and route (rules.go, checked against the service
// descriptor by a test), and the audit record of every call (Auditor).
//
// They are one package because they are one question asked at three
// moments of a call, and a rule about callers must have one home: an RPC
// declared here cannot ship without a decision on who may call it.
package access
