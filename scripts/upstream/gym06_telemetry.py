"""Run a nemo-gym 0.6.0 server with 0.6.0's own telemetry functions called
where nemo-gym 0.7.0 calls them.

Why: no release of NeMo Gym exports telemetry from its servers. 0.7.0 calls
its telemetry package but, with the released nemo-lens 0.1.0, that package
fails an import (nemo.lens.semconv has no NV_DL_RANK) and stays off. 0.6.0's
package works with nemo-lens 0.1.0, but no 0.6.0 server calls it. So this
wrapper supplies 0.7.0's call sites, and nothing else, around 0.6.0's
released code. No installed file is changed: in this process's memory the
wrapper replaces setup_webserver of the imported server class, the uvicorn
and the request function that nemo_gym.server_utils sees (each delegates to
the released one), then runs 0.6.0's own run_webserver.

Usage, under NeMo Gym's launch contract (as upstream's launcher starts a
server): NEMO_GYM_CONFIG_PATH=<config name>, NEMO_GYM_CONFIG_DICT holding
the server's block plus head_server and dry_run: false, then

    <nemo-gym 0.6.0 venv>/bin/python gym06_telemetry.py [SERVER]

SERVER is resources_servers/string_match (the default) or
responses_api_agents/simple_agent. The wrapper works in the server's own
directory, as upstream's launcher starts it there.

The calls, each one 0.6.0's function, each at 0.7.0's point (file:line of
nemo-gym 0.7.0's site-packages):

1. nemo_gym.telemetry.setup.init_telemetry(server_name=<config name>,
   server_type=<the server's type>): before the app is built. 0.7.0:
   nemo_gym/server_utils.py:1353 (run_webserver calls
   server.setup_telemetry() after the dry_run check, before
   setup_webserver), which is server_utils.py:1155-1168 (init_telemetry with
   the config name and the type found from the class's bases,
   server_utils.py:1044-1059).
2. The routes' wrappers, the released 0.6.0 handlers inside:
   - resources server: traced_verify_endpoint(judge_failsafe(self.verify),
     static_attributes={"nemo.gym.server.name": <config name>}) as /verify.
     0.7.0: nemo_gym/base_resources_server.py:253-258. 0.6.0 registers
     judge_failsafe(verify) alone (0.6.0 base_resources_server.py:147).
   - agent: traced_endpoint(GymSpanGroup.AGENT, "gym.agent.responses",
     self.responses, attrs) on /v1/responses and its two rollout-prefixed
     twins, and traced_rollout_endpoint(self.run, attrs) inside the
     rollout_context of /run. 0.7.0: nemo_gym/base_responses_api_agent.py:
     235-262. 0.6.0 registers the bare handlers (0.6.0
     base_responses_api_agent.py:68-93).
   The wrapper swaps those routes for the wrapped ones right after 0.6.0
   builds the app.
3. nemo_gym.telemetry.contrib.instrument_fastapi_app(app) when
   get_telemetry() exports and the span group "server" is on: after the
   middleware, just before uvicorn.run. 0.7.0: nemo_gym/server_utils.py:1379
   (server.instrument_app_for_telemetry(app)), which is
   server_utils.py:1170-1191.
4. nemo_gym.telemetry.setup.shutdown_telemetry() in a finally after
   uvicorn.run returns. 0.7.0: nemo_gym/server_utils.py:1439-1448.
5. Egress (what an agent sends to its model and resources servers): when
   the span group "http_client" is on, the released request runs inside
   nemo_gym.telemetry.spans.client_span("HTTP <METHOD>") with
   nemo_gym.telemetry.contrib.inject_trace_context(headers) and the span's
   method, query-free URL, rollout id and status attributes. 0.7.0:
   nemo_gym/server_utils.py:470-478 (the gate in request) and 491-542
   (_traced_request). A string_match server sends nothing, so this matters
   for the agent.
"""

import importlib
import os
import sys

# SERVER argument -> (module, class, the type 0.7.0 finds from its bases).
SERVERS = {
    "resources_servers/string_match": (
        "resources_servers.string_match.app",
        "StringMatchResourcesServer",
        "resources_servers",
    ),
    "responses_api_agents/simple_agent": (
        "responses_api_agents.simple_agent.app",
        "SimpleAgent",
        "responses_api_agents",
    ),
}


def main(argv) -> int:
    server = argv[1] if len(argv) > 1 else "resources_servers/string_match"
    if server not in SERVERS or len(argv) > 2:
        print(f"usage: gym06_telemetry.py [{' | '.join(SERVERS)}]", file=sys.stderr)
        return 2
    module_name, class_name, server_type = SERVERS[server]

    import uvicorn

    import nemo_gym.server_utils as server_utils
    from nemo_gym.rollout_correlation import current_rollout_id
    from nemo_gym.telemetry._fallbacks import is_span_group_enabled, safe_set_span_attributes
    from nemo_gym.telemetry.contrib import inject_trace_context, instrument_fastapi_app
    from nemo_gym.telemetry.setup import get_telemetry, init_telemetry, shutdown_telemetry
    from nemo_gym.telemetry.span_groups import GymSpanGroup
    from nemo_gym.telemetry.spans import client_span

    module = importlib.import_module(module_name)
    os.chdir(os.path.dirname(module.__file__))
    cls = getattr(module, class_name)
    released_setup_webserver = cls.setup_webserver

    def replace_route(app, path, handler):
        app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != path]
        app.post(path)(handler)

    def wrap_resources_routes(self, app):
        from nemo_gym.judge import judge_failsafe
        from nemo_gym.telemetry.endpoints import traced_verify_endpoint

        # 0.7.0 base_resources_server.py:253-258.
        replace_route(
            app,
            "/verify",
            traced_verify_endpoint(
                judge_failsafe(self.verify),
                static_attributes={"nemo.gym.server.name": self.config.name},
            ),
        )

    def wrap_agent_routes(self, app):
        from functools import wraps
        from typing import Any

        from nemo_gym.base_resources_server import BaseRunRequest
        from nemo_gym.config_types import ROLLOUT_PATH_PREFIX, TOKEN_CAPTURE_PATH_SEGMENT
        from nemo_gym.rollout_correlation import rollout_context
        from nemo_gym.telemetry.endpoints import traced_endpoint, traced_rollout_endpoint

        # 0.7.0 base_responses_api_agent.py:235-262.
        attrs = {"nemo.gym.server.name": self.config.name}
        traced_responses = traced_endpoint(GymSpanGroup.AGENT, "gym.agent.responses", self.responses, attrs)
        for path in (
            "/v1/responses",
            f"/{ROLLOUT_PATH_PREFIX}/{{rollout_id}}/v1/responses",
            f"/{ROLLOUT_PATH_PREFIX}/{{rollout_id}}/{TOKEN_CAPTURE_PATH_SEGMENT}/v1/responses",
        ):
            replace_route(app, path, traced_responses)
        run = traced_rollout_endpoint(self.run, attrs)

        @wraps(run)
        async def run_with_rollout_context(*args: Any, **kwargs: Any):
            body = kwargs.get("body")
            if body is None:
                body = next((arg for arg in args if isinstance(arg, BaseRunRequest)), None)
            with rollout_context(self.rollout_id_from_run(body)):
                return await run(*args, **kwargs)

        replace_route(app, "/run", run_with_rollout_context)

    wrap_routes = wrap_agent_routes if server_type == "responses_api_agents" else wrap_resources_routes

    def setup_webserver(self):
        # Call 1: 0.7.0 server_utils.py:1353 -> 1163-1168.
        init_telemetry(server_name=self.config.name, server_type=server_type)
        app = released_setup_webserver(self)
        # Call 2.
        wrap_routes(self, app)
        return app

    cls.setup_webserver = setup_webserver

    class _Uvicorn:
        """nemo_gym.server_utils's view of uvicorn: run gains calls 3 and 4."""

        def __getattr__(self, name):
            return getattr(uvicorn, name)

        @staticmethod
        def run(**kwargs):
            # Call 3: 0.7.0 server_utils.py:1379 -> 1183-1191.
            telemetry = get_telemetry()
            if telemetry is not None and telemetry.is_exporting and is_span_group_enabled(GymSpanGroup.SERVER):
                instrument_fastapi_app(kwargs["app"])
            try:
                uvicorn.run(**kwargs)
            finally:
                # Call 4: 0.7.0 server_utils.py:1439-1448.
                shutdown_telemetry()

    server_utils.uvicorn = _Uvicorn()

    # Call 5: ServerClient.request calls the module's request by name
    # (0.6.0 server_utils.py:402), so replacing that name covers every hop.
    released_request = server_utils.request

    async def request(method, url, **kwargs):
        # The gate first, as 0.7.0 server_utils.py:472.
        if not is_span_group_enabled(GymSpanGroup.HTTP_CLIENT):
            return await released_request(method, url, **kwargs)
        # 0.7.0 server_utils.py:515-542.
        with client_span(f"HTTP {method.upper()}") as span:
            headers = kwargs.get("headers")
            headers = dict(headers) if headers else {}
            inject_trace_context(headers)
            kwargs["headers"] = headers
            if span is not None:
                safe_set_span_attributes(
                    span,
                    {
                        "http.request.method": method.upper(),
                        "url.full": url.split("?", 1)[0],
                        "nemo.gym.rollout.id": current_rollout_id(),
                    },
                )
            response = await released_request(method, url, **kwargs)
            if span is not None:
                safe_set_span_attributes(span, {"http.response.status_code": response.status})
            return response

    server_utils.request = request
    cls.run_webserver()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
