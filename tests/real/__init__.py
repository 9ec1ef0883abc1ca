"""The real-server tier (``pytest -m real_server``; see conftest.py)."""
