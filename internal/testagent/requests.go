package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// parseRequest parses the directives that make requests of the client:
// permission, elicitation, fs and terminal, floods of them, and when an
// unanswered one is withdrawn (withdraw_after).
func parseRequest(name, rest string) (step, error) {
	switch name {
	case "permission":
		f, err := fields(rest, 1, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.say(askPermission(t, f[0]))
			return false
		}, nil

	case "elicit", "elicit_url":
		params := obj{"mode": "url", "message": "please open", "elicitationId": "e-1", "url": "https://example.com/connect"}
		if name == "elicit" {
			schema := json.RawMessage(strings.TrimSpace(rest))
			if !json.Valid(schema) {
				return nil, fmt.Errorf("wants a JSON schema")
			}
			params = obj{"mode": "form", "message": "please answer", "requestedSchema": schema}
		} else if strings.TrimSpace(rest) != "" {
			return nil, fmt.Errorf("takes no arguments")
		}
		return func(t *turn) bool {
			params["sessionId"] = t.sessionID
			t.say(elicit(t, params))
			return false
		}, nil

	case "read":
		f, err := fields(rest, 1, 3)
		if err != nil {
			return nil, err
		}
		nums, err := ints(f[1:])
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			params := obj{"sessionId": t.sessionID, "path": f[0]}
			if len(nums) > 0 {
				params["line"] = nums[0]
			}
			if len(nums) > 1 {
				params["limit"] = nums[1]
			}
			ans := t.call("fs/read_text_file", params)
			if ans.Error != nil {
				t.say(fmt.Sprintf("read-error:%d:%s", ans.Error.Code, ans.Error.Message))
				return false
			}
			var r struct {
				Content string `json:"content"`
			}
			_ = json.Unmarshal(ans.Result, &r)
			t.say("read:" + r.Content)
			return false
		}, nil

	case "write":
		path, text, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
		if path == "" {
			return nil, fmt.Errorf("wants PATH TEXT")
		}
		text = unescape(text)
		return func(t *turn) bool {
			ans := t.call("fs/write_text_file", obj{"sessionId": t.sessionID, "path": path, "content": text})
			if ans.Error != nil {
				t.say(fmt.Sprintf("write-error:%d:%s", ans.Error.Code, ans.Error.Message))
			} else {
				t.say("write:ok")
			}
			return false
		}, nil

	case "terminal":
		return noArgs(rest, func(t *turn) bool {
			ans := t.call("terminal/create", obj{"sessionId": t.sessionID, "command": "echo",
				"args": []string{"testagent"}})
			if ans.Error != nil {
				t.say(fmt.Sprintf("terminal-error:%d", ans.Error.Code))
			} else {
				t.say("terminal:ok")
			}
			return false
		})

	case "withdraw_after":
		v, err := intArgs(rest, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.mu.Lock()
			t.withdraw = time.Duration(v[0]) * time.Millisecond
			t.mu.Unlock()
			return false
		}, nil

	case "readflood":
		f, err := fields(rest, 2, 2)
		if err != nil {
			return nil, err
		}
		v, err := intArgs(f[0], 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.a.sendRequests("fs/read_text_file", v[0], obj{"sessionId": t.sessionID, "path": f[1]})
			return false
		}, nil

	case "reqflood":
		v, err := intArgs(rest, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.a.sendRequests("testagent/flood", v[0], obj{})
			return false
		}, nil
	}
	return nil, errOtherDirective
}

// askPermission runs session/request_permission and words its outcome.
func askPermission(t *turn, toolCallID string) string {
	ans := t.call("session/request_permission", obj{
		"sessionId": t.sessionID,
		"toolCall":  obj{"toolCallId": toolCallID},
		"options": []obj{
			{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
			{"optionId": "reject", "name": "Reject", "kind": "reject_once"},
		},
	})
	if ans.Error != nil {
		return fmt.Sprintf("permission-error:%d:%s", ans.Error.Code, ans.Error.Message)
	}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if json.Unmarshal(ans.Result, &r) == nil {
		switch {
		case r.Outcome.Outcome == "cancelled":
			return "permission:cancelled"
		case r.Outcome.Outcome == "selected" && r.Outcome.OptionID != "":
			return "permission:" + r.Outcome.OptionID
		}
	}
	return "permission-invalid:" + string(ans.Result)
}

// elicit sends elicitation/create and describes the answer:
// "elicitation:<action>", with ":<content as JSON>" when content came, or
// "elicitation-error:<code>:<message>".
func elicit(t *turn, params obj) string {
	ans := t.call("elicitation/create", params)
	if ans.Error != nil {
		return fmt.Sprintf("elicitation-error:%d:%s", ans.Error.Code, ans.Error.Message)
	}
	var r struct {
		Action  string          `json:"action"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(ans.Result, &r)
	if len(r.Content) > 0 && string(r.Content) != "null" {
		return "elicitation:" + r.Action + ":" + string(r.Content)
	}
	return "elicitation:" + r.Action
}
