from tests.web.servers import web_env, web_server  # noqa: F401 - fixtures
