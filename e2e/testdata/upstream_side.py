#!/usr/bin/env python3
"""Plays NeMo Gym's Python side of a conversation with gymlens servers.

Standard library only. Two roles:

  collector AGENT_URL ROWS_JSONL OUT_JSONL
      What upstream's rollout collector does with each row: POST it to the
      agent's /run with no cookies and keep the answer, adding
      _ng_task_index, _ng_rollout_index and agent_ref the way the collector
      does. Exits 1 on any non-2xx answer (upstream aborts then).

  agent RESOURCES_URL
      What upstream's simple agent does against a resources server, for the
      counter environment: /seed_session with the whole row, each tool call
      with the cookies of the latest response, then /verify with those
      cookies. Prints one JSON line per scenario with the rewards it got.
"""
import http.cookies
import json
import sys
import urllib.error
import urllib.request


def post(url, body, cookies=None):
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    if cookies:
        req.add_header("Cookie", "; ".join(f"{k}={v}" for k, v in cookies.items()))
    try:
        with urllib.request.urlopen(req, timeout=60) as res:
            return res.status, res.read().decode(), parse_cookies(res.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), parse_cookies(err.headers)


def parse_cookies(headers):
    jar = {}
    for value in headers.get_all("Set-Cookie") or []:
        c = http.cookies.SimpleCookie()
        c.load(value)
        for k, morsel in c.items():
            jar[k] = morsel.value
    return jar


def collector(agent_url, rows_path, out_path):
    rows = [json.loads(line) for line in open(rows_path) if line.strip()]
    with open(out_path, "w") as out:
        for i, row in enumerate(rows):
            row = dict(row, _ng_task_index=i, _ng_rollout_index=0)
            status, text, _ = post(agent_url.rstrip("/") + "/run", row)
            if status // 100 != 2:
                print(f"/run answered {status}: {text}", file=sys.stderr)
                return 1
            result = json.loads(text)
            result.update(_ng_task_index=i, _ng_rollout_index=0, agent_ref=row.get("agent_ref"))
            out.write(json.dumps(result) + "\n")
    return 0


def counter_scenario(base, initial, adds, expected, prefix=""):
    params = {"input": [{"role": "user", "content": "count"}]}
    row = {"responses_create_params": params, "initial_count": initial, "expected_count": expected}
    status, text, cookies = post(base + prefix + "/seed_session", row)
    assert status == 200, (status, text)
    assert cookies, "no session cookie on /seed_session"
    outputs = []
    for n in adds:
        status, text, new = post(base + "/increment_counter", {"count": n}, cookies)
        assert new, "no session cookie on a tool response"
        cookies = new  # the agent keeps the latest response's cookies only
        outputs.append(text)
    status, text, new = post(base + "/get_counter_value", {}, cookies)
    cookies = new or cookies
    count = json.loads(text)["count"]
    response = {"id": "resp_1", "object": "response", "created_at": 1, "model": "m",
                "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": f"The count is {count}.", "annotations": []}]}],
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
    status, text, _ = post(base + prefix + "/verify", dict(row, response=response), cookies)
    assert status == 200, (status, text)
    return {"count": count, "reward": float(json.loads(text)["reward"]), "tool_outputs": outputs}


def agent(resources_url):
    base = resources_url.rstrip("/")
    print(json.dumps(counter_scenario(base, 3, [1, 2], 6)))
    print(json.dumps(counter_scenario(base, 0, [5], 4, prefix="/ng-rollout/7-0")))
    # Without the cookie the verifier sees no session and scores 0.
    status, text, _ = post(base + "/verify", {"responses_create_params": {"input": "x"}, "expected_count": 0,
                                              "response": {"id": "r", "object": "response", "created_at": 1,
                                                           "model": "m", "output": [], "parallel_tool_calls": True,
                                                           "tool_choice": "auto", "tools": []}})
    print(json.dumps({"no_cookie_status": status, "reward": float(json.loads(text)["reward"])}))
    return 0


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "collector":
        sys.exit(collector(*sys.argv[2:5]))
    if role == "agent":
        sys.exit(agent(sys.argv[2]))
    sys.exit(f"unknown role {role}")
