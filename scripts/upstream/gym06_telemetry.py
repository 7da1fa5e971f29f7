"""Run nemo-gym 0.6.0's string_match resources server with 0.6.0's own
telemetry functions called where nemo-gym 0.7.0 calls them.

Why: no release of NeMo Gym exports telemetry from its servers. 0.7.0 calls
its telemetry package but, with the released nemo-lens 0.1.0, that package
fails an import (nemo.lens.semconv has no NV_DL_RANK) and stays off. 0.6.0's
package works with nemo-lens 0.1.0, but no 0.6.0 server calls it. So this
wrapper supplies 0.7.0's call sites, and nothing else, around 0.6.0's
released code. No installed file is changed: in this process's memory the
wrapper replaces setup_webserver of the imported server class and the
uvicorn that nemo_gym.server_utils sees (each delegates to the released
one), then runs 0.6.0's own run_webserver.

Usage, under NeMo Gym's launch contract (as upstream's launcher starts a
server): cwd the server directory (resources_servers/string_match),
NEMO_GYM_CONFIG_PATH=string_match, NEMO_GYM_CONFIG_DICT holding the
server's block plus head_server and dry_run: false, then

    <nemo-gym 0.6.0 venv>/bin/python gym06_telemetry.py

The calls, each one 0.6.0's function, each at 0.7.0's point (file:line of
nemo-gym 0.7.0's site-packages):

1. nemo_gym.telemetry.setup.init_telemetry(server_name=<config name>,
   server_type="resources_servers"): before the app is built. 0.7.0:
   nemo_gym/server_utils.py:1353 (run_webserver calls
   server.setup_telemetry() after the dry_run check, before
   setup_webserver), which is server_utils.py:1155-1168 (init_telemetry with
   the config name and the type found from the class's bases,
   server_utils.py:1044-1059: SimpleResourcesServer -> resources_servers).
2. nemo_gym.telemetry.endpoints.traced_verify_endpoint(
   judge_failsafe(self.verify),
   static_attributes={"nemo.gym.server.name": <config name>}) as the
   /verify route. 0.7.0: nemo_gym/base_resources_server.py:253-258. 0.6.0's
   SimpleResourcesServer.setup_webserver registers judge_failsafe(verify)
   alone (0.6.0 base_resources_server.py:147); the wrapper replaces that one
   route with the wrapped handler right after 0.6.0 builds the app.
3. nemo_gym.telemetry.contrib.instrument_fastapi_app(app) when
   get_telemetry() exports and the span group "server" is on: after the
   middleware, just before uvicorn.run. 0.7.0: nemo_gym/server_utils.py:1379
   (server.instrument_app_for_telemetry(app)), which is
   server_utils.py:1170-1191.
4. nemo_gym.telemetry.setup.shutdown_telemetry() in a finally after
   uvicorn.run returns. 0.7.0: nemo_gym/server_utils.py:1439-1448.

Not called, because a string_match server has no site for them: 0.7.0's
inject_trace_context (server_utils.py:512, egress of ServerClient requests;
string_match makes none) and traced_rollout_endpoint (an agent's /run).
"""

import sys


def main() -> None:
    import uvicorn

    import nemo_gym.server_utils as server_utils
    from nemo_gym.judge import judge_failsafe
    from nemo_gym.telemetry._fallbacks import is_span_group_enabled
    from nemo_gym.telemetry.contrib import instrument_fastapi_app
    from nemo_gym.telemetry.endpoints import traced_verify_endpoint
    from nemo_gym.telemetry.setup import get_telemetry, init_telemetry, shutdown_telemetry
    from nemo_gym.telemetry.span_groups import GymSpanGroup
    from resources_servers.string_match.app import StringMatchResourcesServer

    cls = StringMatchResourcesServer
    released_setup_webserver = cls.setup_webserver

    def setup_webserver(self):
        # Call 1: 0.7.0 server_utils.py:1353 -> 1163-1168.
        init_telemetry(server_name=self.config.name, server_type="resources_servers")
        app = released_setup_webserver(self)
        # Call 2: 0.7.0 base_resources_server.py:253-258.
        app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != "/verify"]
        app.post("/verify")(
            traced_verify_endpoint(
                judge_failsafe(self.verify),
                static_attributes={"nemo.gym.server.name": self.config.name},
            )
        )
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
    cls.run_webserver()


if __name__ == "__main__":
    sys.exit(main())
