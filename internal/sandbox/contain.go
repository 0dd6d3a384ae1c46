package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mapOwnIDs maps the launcher's uid and gid, given as "UID:GID" (the
// gateway's, which the launcher cannot learn from inside a user namespace
// whose maps are not written yet), to themselves in its user namespace.
// An unprivileged process may write its gid map only once setgroups is
// denied, so the agent cannot drop a group to reach what the group is
// denied.
func mapOwnIDs(ids string) error {
	u, g, ok := strings.Cut(ids, ":")
	uid, uerr := strconv.Atoi(u)
	gid, gerr := strconv.Atoi(g)
	if !ok || uerr != nil || gerr != nil {
		return fmt.Errorf("%q is not UID:GID", ids)
	}
	for _, w := range []struct{ file, text string }{
		{"/proc/self/setgroups", "deny"},
		{"/proc/self/uid_map", fmt.Sprintf("%d %d 1", uid, uid)},
		{"/proc/self/gid_map", fmt.Sprintf("%d %d 1", gid, gid)},
	} {
		// One write each: the kernel takes a map in a single write.
		if err := os.WriteFile(w.file, []byte(w.text), 0); err != nil {
			return err
		}
	}
	return nil
}

// mountOwnProc mounts, over /proc, a proc file system of the launcher's
// PID namespace, so that the agent sees its own process tree only: not
// the gateway, whose pid it then cannot even name (so neither its
// environment nor its memory), nor other agents. The launcher's mount
// namespace is its own copy, made a slave first so the mount does not
// propagate back to the gateway's.
//
// The launcher then gives up CAP_SYS_ADMIN (dropSysAdmin), the capability that could unmount the
// fresh /proc (uncovering the gateway's beneath it) or mount another, for
// the agent and everything it executes: from the bounding set where it
// may (a gateway run as root, whose agents keep root's other
// capabilities), and from the ambient, permitted, effective and
// inheritable sets, and it sets no_new_privs so no program the agent runs
// gains it back. A user namespace the agent might create copies the
// mounts locked, so it cannot uncover the gateway's /proc either. Both act
// on the calling thread only: the caller has locked it, and executes the
// agent from it.
func mountOwnProc() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("making the mounts private to the agent: %w", err)
	}
	return unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

// dropSysAdmin is what mountOwnProc says of CAP_SYS_ADMIN.
func dropSysAdmin() error {
	// EPERM: without CAP_SETPCAP (in a user namespace, as a non-root uid)
	// the bounding set cannot shrink, and does not need to: such a
	// process gets no capability from executing a program.
	if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_ADMIN, 0, 0, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("dropping CAP_SYS_ADMIN from the bounding set: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clearing the ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	i, bit := unix.CAP_SYS_ADMIN/32, uint32(1)<<(unix.CAP_SYS_ADMIN%32)
	data[i].Effective &^= bit
	data[i].Permitted &^= bit
	data[i].Inheritable &^= bit
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	return nil
}
