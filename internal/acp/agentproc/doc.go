// Package agentproc starts an agent program and holds its whole process
// tree, so that nothing the agent starts outlives the agent, its session or
// the gateway.
//
// It is a package of its own because containment is a matter between the
// gateway and the kernel (clone flags, namespaces, a launcher that completes
// them, signals to a process group, reaping), which the ACP conversation on
// the agent's stdio knows nothing of: package acp starts a Process, talks to
// it through Stdin and Stdout, and stops it. See Process for the kinds of
// containment and why a PID namespace is preferred, and ProbeContainment for
// how the gateway learns, once, which kind the kernel allows.
package agentproc
