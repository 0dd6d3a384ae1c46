package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// parseEnding parses the directives that end a turn: its answer, answers a
// gateway must refuse, and the agent's exit or its stdout closing.
func parseEnding(name, rest string) (step, error) {
	switch name {
	case "stop":
		f, err := fields(rest, 1, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.a.reply(t.id, obj{"stopReason": f[0]})
			return true
		}, nil

	case "stop_meta":
		f, err := fields(rest, 2, 2)
		if err != nil {
			return nil, err
		}
		k, v, ok := strings.Cut(f[1], "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("wants REASON KEY=VALUE")
		}
		return func(t *turn) bool {
			t.a.reply(t.id, obj{"stopReason": f[0], "_meta": obj{k: v}})
			return true
		}, nil

	case "stop_usage":
		f, err := fields(rest, 3, 3)
		if err != nil {
			return nil, err
		}
		v, err := ints(f[1:])
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.a.reply(t.id, obj{"stopReason": f[0], "usage": obj{
				"inputTokens": v[0], "outputTokens": v[1], "totalTokens": v[0] + v[1]}})
			return true
		}, nil

	case "error":
		code, msg, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
		n, err := strconv.Atoi(code)
		if err != nil {
			return nil, fmt.Errorf("wants CODE MESSAGE..., CODE an integer")
		}
		return func(t *turn) bool {
			t.a.replyError(t.id, n, msg)
			return true
		}, nil

	case "neither":
		return noArgs(rest, func(t *turn) bool {
			t.a.out.writeRaw(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s}`, t.id))
			return true
		})

	case "exit":
		v, err := intArgs(rest, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			os.Exit(v[0])
			return true
		}, nil

	case "close_stdout":
		return noArgs(rest, func(t *turn) bool {
			t.a.out.close()
			return true
		})

	case "garbage_response":
		return noArgs(rest, func(t *turn) bool {
			t.a.out.writeRaw(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":`, t.id))
			return true
		})
	}
	return nil, errOtherDirective
}
