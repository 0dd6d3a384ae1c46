# Sourced by the scripts that start `acpgate serve --listen 127.0.0.1:0`.
#
# acpgate_address LOG PID waits up to 30 s for the gateway (PID) to write its
# "acpgate listening on HOST:PORT" line to LOG and prints HOST:PORT. If the
# gateway exits or never listens, it shows the log on stderr and fails.
acpgate_address() {
	local log=$1 pid=$2 addr
	for _ in $(seq 1 300); do
		addr=$(sed -n 's/^acpgate listening on //p' "$log" | head -n 1)
		if [ -n "$addr" ]; then
			echo "$addr"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	echo "acpgate did not start listening:" >&2
	cat "$log" >&2
	return 1
}
