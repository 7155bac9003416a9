"""Entry point the Dify plugin daemon runs (``meta.runner.entrypoint: main``)."""

from dify_plugin import DifyPluginEnv, Plugin

plugin = Plugin(DifyPluginEnv(MAX_REQUEST_TIMEOUT=300))

if __name__ == "__main__":
    plugin.run()
