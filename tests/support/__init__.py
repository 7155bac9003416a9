"""Test support: helpers that tests import as ``support.<module>``.

``tests/`` is on ``sys.path`` because pytest inserts the folder of the root
``conftest.py`` (there is no ``tests/__init__.py``). Among the helpers,
``openai_server`` speaks the OpenAI Chat Completions API from a script so a
real ``ChatOpenAI`` client can be tested without the internet, and
``langgraph_server`` runs ``langgraph dev`` on a free port.
"""
